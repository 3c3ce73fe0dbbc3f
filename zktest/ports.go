package zktest

import (
	"fmt"
	"net"
)

// freePorts returns n distinct TCP ports on 127.0.0.1 that were free a
// moment ago. All listeners are held open until every port is chosen, so
// the ports are distinct; another process may still take one before
// ZooKeeper binds it, which Start handles by retrying.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("zktest: pick a free port: %w", err)
		}
		defer ln.Close()
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
