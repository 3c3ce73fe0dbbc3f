package zktest

// maxFrame bounds the frames this package reads (ZooKeeper's own limit,
// jute.maxbuffer, defaults to 1 MiB). The wire codec itself is
// internal/jute, shared with zkserver.
const maxFrame = 64 << 20
