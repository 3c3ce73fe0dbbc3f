package jute

// Operation codes of ZooKeeper requests.
const (
	OpNotify               int32 = 0
	OpCreate               int32 = 1
	OpDelete               int32 = 2
	OpExists               int32 = 3
	OpGetData              int32 = 4
	OpSetData              int32 = 5
	OpGetACL               int32 = 6
	OpSetACL               int32 = 7
	OpGetChildren          int32 = 8
	OpSync                 int32 = 9
	OpPing                 int32 = 11
	OpGetChildren2         int32 = 12
	OpCheck                int32 = 13
	OpMulti                int32 = 14
	OpCreate2              int32 = 15
	OpReconfig             int32 = 16
	OpCheckWatches         int32 = 17
	OpRemoveWatches        int32 = 18
	OpCreateContainer      int32 = 19
	OpCreateTTL            int32 = 21
	OpMultiRead            int32 = 22
	OpAuth                 int32 = 100
	OpSetWatches           int32 = 101
	OpSASL                 int32 = 102
	OpGetEphemerals        int32 = 103
	OpGetAllChildrenNumber int32 = 104
	OpSetWatches2          int32 = 105
	OpAddWatch             int32 = 106
	OpWhoAmI               int32 = 107
	OpCloseSession         int32 = -11
	OpError                int32 = -1 // type of an error result in a multi
)

// Special xids.
const (
	XidNotification int32 = -1
	XidPing         int32 = -2
	XidAuth         int32 = -4
	XidSetWatches   int32 = -8
)

// ZooKeeper error codes.
const (
	ErrOK                      int32 = 0
	ErrSystem                  int32 = -1
	ErrRuntimeInconsistency    int32 = -2
	ErrConnectionLoss          int32 = -4
	ErrMarshalling             int32 = -5
	ErrUnimplemented           int32 = -6
	ErrBadArguments            int32 = -8
	ErrNoNode                  int32 = -101
	ErrNoAuth                  int32 = -102
	ErrBadVersion              int32 = -103
	ErrNoChildrenForEphemerals int32 = -108
	ErrNodeExists              int32 = -110
	ErrNotEmpty                int32 = -111
	ErrSessionExpired          int32 = -112
	ErrInvalidACL              int32 = -114
	ErrAuthFailed              int32 = -115
	ErrNoWatcher               int32 = -121
	ErrReconfigDisabled        int32 = -123
)

// Watch event types.
const (
	EventNone                   int32 = -1
	EventNodeCreated            int32 = 1
	EventNodeDeleted            int32 = 2
	EventNodeDataChanged        int32 = 3
	EventNodeChildrenChanged    int32 = 4
	EventDataWatchRemoved       int32 = 5
	EventChildWatchRemoved      int32 = 6
	EventPersistentWatchRemoved int32 = 7
)

// StateSyncConnected is the keeper state of watch notifications.
const StateSyncConnected int32 = 3

// Permission bits of an ACL.
const (
	PermRead   int32 = 1
	PermWrite  int32 = 2
	PermCreate int32 = 4
	PermDelete int32 = 8
	PermAdmin  int32 = 16
	PermAll    int32 = 31
)

// Watcher types of checkWatches and removeWatches.
const (
	WatcherChildren int32 = 1
	WatcherData     int32 = 2
	WatcherAny      int32 = 3
)

// Modes of addWatch.
const (
	AddWatchPersistent          int32 = 0
	AddWatchPersistentRecursive int32 = 1
)
