package jute

// opNames gives each opcode its two names in ZooKeeper: the one its
// metrics and logs use, and the four-letter one its cons command shows
// as a connection's last operation ("" where cons has none).
var opNames = map[int32]struct{ name, abbrev string }{
	OpCreate:               {"create", "CREA"},
	OpDelete:               {"delete", "DELE"},
	OpExists:               {"exists", "EXIS"},
	OpGetData:              {"getData", "GETD"},
	OpSetData:              {"setData", "SETD"},
	OpGetACL:               {"getACL", "GETA"},
	OpSetACL:               {"setACL", "SETA"},
	OpGetChildren:          {"getChildren", "GETC"},
	OpSync:                 {"sync", "SYNC"},
	OpPing:                 {"ping", "PING"},
	OpGetChildren2:         {"getChildren2", "GETC"},
	OpCheck:                {"check", "CHEC"},
	OpMulti:                {"multi", "MULT"},
	OpCreate2:              {"create2", "CREA"},
	OpReconfig:             {"reconfig", ""},
	OpCheckWatches:         {"checkWatches", "CHKW"},
	OpRemoveWatches:        {"removeWatches", "REMW"},
	OpCreateContainer:      {"createContainer", "CREA"},
	OpCreateTTL:            {"createTTL", "CREA"},
	OpMultiRead:            {"multiRead", "MLTR"},
	OpAuth:                 {"auth", ""},
	OpSetWatches:           {"setWatches", "SETW"},
	OpSASL:                 {"sasl", ""},
	OpGetEphemerals:        {"getEphemerals", ""},
	OpGetAllChildrenNumber: {"getAllChildrenNumber", ""},
	OpSetWatches2:          {"setWatches2", "SETW"},
	OpAddWatch:             {"addWatch", "ADDW"},
	OpWhoAmI:               {"whoAmI", ""},
	OpCloseSession:         {"closeSession", "CLOS"},
}

// OpName names op as ZooKeeper's metrics and logs do ("getData"), or
// "unknown".
func OpName(op int32) string {
	if n, ok := opNames[op]; ok {
		return n.name
	}
	return "unknown"
}

// OpAbbrev names op as ZooKeeper's cons command does ("GETD"), or "NA"
// for one it has no name for.
func OpAbbrev(op int32) string {
	if n, ok := opNames[op]; ok && n.abbrev != "" {
		return n.abbrev
	}
	return "NA"
}
