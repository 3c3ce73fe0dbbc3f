package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/zkclient"
)

// The data commands: ls, get, set, create, rm, stat. Each opens a session,
// does one thing, and closes it. A node that does not exist, a stale
// --version and a refused ACL are ZooKeeper errors (exit status 1) naming
// the path; a bad path or value is bad input (2).

// withSession runs f on a new session, closed afterwards, and gives its
// error an exit status; a signal makes it "WHAT: interrupted" (status 1).
func (a *app) withSession(cmd *cobra.Command, what string, f func(ctx context.Context, s *zkrecipes.Session) error) error {
	return a.session(cmd, codef(exitFailure, "%s: interrupted", what), func(ctx context.Context, s *zkrecipes.Session) error {
		if err := f(ctx, s); err != nil {
			return dataError(what, err)
		}
		return nil
	})
}

// dataError words the data plane's errors for an operator. The client's
// errors already name the request and its path.
func dataError(what string, err error) error {
	var e *exitError
	if errors.As(err, &e) {
		return err
	}
	var op *zkclient.OpError
	if errors.As(err, &op) {
		what = ""
	}
	wrap := func(hint string) error {
		if what == "" {
			return withCode(exitFailure, fmt.Errorf("%w%s", err, hint))
		}
		return withCode(exitFailure, fmt.Errorf("%s: %w%s", what, err, hint))
	}
	switch {
	case errors.Is(err, zkclient.ErrBadVersion):
		return wrap(" (the node changed since that version; read it again)")
	case errors.Is(err, zkclient.ErrNotEmpty):
		return wrap(" (use -r to delete its children too)")
	case errors.Is(err, zkclient.ErrNoAuth):
		return wrap(" (the node's ACL refuses this session's credentials; see --auth, --tls-cert)")
	case errors.Is(err, zkrecipes.ErrInvalidPath), errors.Is(err, zkrecipes.ErrInvalidArgument):
		return withCode(exitUsage, err)
	}
	return wrap("")
}

// value returns the VALUE argument: the text itself, or standard input
// for "-".
func (a *app) value(arg string) ([]byte, error) {
	if arg != "-" {
		return []byte(arg), nil
	}
	b, err := io.ReadAll(io.LimitReader(a.stdin, maxNodeData+1))
	if err != nil {
		return nil, codef(exitFailure, "reading the value from standard input: %v", err)
	}
	if len(b) > maxNodeData {
		return nil, usagef("the value on standard input is over %d bytes, ZooKeeper's default limit for a node (jute.maxbuffer)", maxNodeData)
	}
	return b, nil
}

// maxNodeData is ZooKeeper's default jute.maxbuffer, the most a node holds.
const maxNodeData = 1 << 20

func (a *app) newLsCmd() *cobra.Command {
	var recursive, asJSON bool
	cmd := &cobra.Command{
		Use:   "ls PATH",
		Short: "List a node's children (with -R, every node under it)",
		Long: `List the children of PATH, sorted, one per line. With -R, list every node under
PATH, depth first, as full paths (PATH itself first); listing / leaves out
/zookeeper, the server's own, and says so on stderr.`,
		Example: `  zkr ls /services
  zkr ls -R /app --json`,
		Args: onePath,
		RunE: func(cmd *cobra.Command, args []string) error {
			path := args[0]
			return a.withSession(cmd, "ls "+path, func(ctx context.Context, s *zkrecipes.Session) error {
				var out []string
				if recursive {
					nodes, skipped, err := readTree(ctx, s, path, readOpts{})
					if err != nil {
						return err
					}
					for _, n := range nodes {
						out = append(out, n.Path)
					}
					for _, p := range skipped {
						fmt.Fprintf(a.stderr, "zkr: ls -R: left out %s (the server's own)\n", p)
					}
				} else {
					kids, _, err := s.Children(ctx, path)
					if err != nil {
						return err
					}
					out = kids
				}
				if asJSON {
					if out == nil {
						out = []string{}
					}
					b, _ := json.Marshal(out) // strings only: cannot fail
					fmt.Fprintf(a.stdout, "%s\n", b)
					return nil
				}
				for _, p := range out {
					fmt.Fprintln(a.stdout, p)
				}
				return nil
			})
		},
	}
	cmd.Flags().BoolVarP(&recursive, "recursive", "R", false, "list every node under PATH, as full paths")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print a JSON list")
	return cmd
}

// nodeView is a node as get --json and stat show it.
type nodeView struct {
	Path       string    `json:"path"`
	Data       *string   `json:"data,omitempty"`        // UTF-8 text
	DataBase64 *string   `json:"data_base64,omitempty"` // anything else
	Null       bool      `json:"null,omitempty"`        // the node was created with no data at all
	Stat       *statView `json:"stat,omitempty"`
}

// statView is a znode's Stat under zkCli.sh's names.
type statView struct {
	Czxid          string    `json:"cZxid"`
	Ctime          time.Time `json:"ctime"`
	Mzxid          string    `json:"mZxid"`
	Mtime          time.Time `json:"mtime"`
	Pzxid          string    `json:"pZxid"`
	Cversion       int32     `json:"cversion"`
	DataVersion    int32     `json:"dataVersion"`
	AclVersion     int32     `json:"aclVersion"`
	EphemeralOwner string    `json:"ephemeralOwner"`
	DataLength     int32     `json:"dataLength"`
	NumChildren    int32     `json:"numChildren"`
}

func viewStat(st zkclient.Stat) *statView {
	hex := func(v int64) string { return "0x" + strconv.FormatInt(v, 16) }
	return &statView{
		Czxid: hex(st.Czxid), Ctime: time.UnixMilli(st.Ctime).UTC(),
		Mzxid: hex(st.Mzxid), Mtime: time.UnixMilli(st.Mtime).UTC(),
		Pzxid: hex(st.Pzxid), Cversion: st.Cversion, DataVersion: st.Version,
		AclVersion: st.Aversion, EphemeralOwner: hex(st.EphemeralOwner),
		DataLength: st.DataLength, NumChildren: st.NumChildren,
	}
}

// printStat prints a Stat one field a line, as zkCli.sh's stat does.
func (a *app) printStat(st *statView) {
	for _, f := range []struct {
		name  string
		value any
	}{
		{"cZxid", st.Czxid}, {"ctime", st.Ctime.Format(time.RFC3339Nano)},
		{"mZxid", st.Mzxid}, {"mtime", st.Mtime.Format(time.RFC3339Nano)},
		{"pZxid", st.Pzxid}, {"cversion", st.Cversion}, {"dataVersion", st.DataVersion},
		{"aclVersion", st.AclVersion}, {"ephemeralOwner", st.EphemeralOwner},
		{"dataLength", st.DataLength}, {"numChildren", st.NumChildren},
	} {
		fmt.Fprintf(a.stdout, "%s = %v\n", f.name, f.value)
	}
}

func (a *app) newGetCmd() *cobra.Command {
	var asJSON, withStat bool
	cmd := &cobra.Command{
		Use:   "get PATH",
		Short: "Print a node's data",
		Long: `Print the data of PATH on standard output, byte for byte, with no newline added.
With --stat, the node's Stat follows on standard error. With --json, print
{path, data | data_base64 | null, stat}: data when it is UTF-8 text,
data_base64 otherwise, null when the node was created with no data at all.`,
		Example: `  zkr get /app/config > config.json
  zkr get /app/config --json`,
		Args: onePath,
		RunE: func(cmd *cobra.Command, args []string) error {
			path := args[0]
			return a.withSession(cmd, "get "+path, func(ctx context.Context, s *zkrecipes.Session) error {
				data, st, err := s.Get(ctx, path)
				if err != nil {
					return err
				}
				if asJSON {
					v := nodeView{Path: path, Stat: viewStat(st), Null: data == nil}
					switch {
					case data == nil:
					case utf8.Valid(data):
						text := string(data)
						v.Data = &text
					default:
						enc := base64.StdEncoding.EncodeToString(data)
						v.DataBase64 = &enc
					}
					b, _ := json.Marshal(v) // plain values only: cannot fail
					fmt.Fprintf(a.stdout, "%s\n", b)
					return nil
				}
				a.stdout.Write(data)
				if withStat {
					saved := a.stdout
					a.stdout = a.stderr
					a.printStat(viewStat(st))
					a.stdout = saved
				}
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON with the data and the Stat")
	cmd.Flags().BoolVar(&withStat, "stat", false, "print the node's Stat on standard error too")
	return cmd
}

func (a *app) newStatCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "stat PATH",
		Short: "Print a node's Stat (versions, zxids, owner, sizes)",
		Long: `Print the Stat of PATH, one field a line under zkCli.sh's names: the zxids and
times of its creation and last change, its versions, the session owning it if it
is ephemeral (0x0 otherwise), its data length and number of children.`,
		Example: `  zkr stat /app/config
  zkr stat /locks/backup --json`,
		Args: onePath,
		RunE: func(cmd *cobra.Command, args []string) error {
			path := args[0]
			return a.withSession(cmd, "stat "+path, func(ctx context.Context, s *zkrecipes.Session) error {
				st, ok, err := s.Exists(ctx, path)
				if err != nil {
					return err
				}
				if !ok {
					return fmt.Errorf("stat %s: %w", path, zkclient.ErrNoNode)
				}
				if asJSON {
					b, _ := json.Marshal(nodeView{Path: path, Stat: viewStat(st)})
					fmt.Fprintf(a.stdout, "%s\n", b)
					return nil
				}
				a.printStat(viewStat(st))
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func (a *app) newSetCmd() *cobra.Command {
	var version int32
	cmd := &cobra.Command{
		Use:   "set PATH VALUE|-",
		Short: "Write a node's data",
		Long: `Write VALUE (or standard input, for -) as the data of PATH, which must exist.
With --version, write only if the node's data version is still that one (as
"zkr stat" shows it): a write at a stale version fails and changes nothing.`,
		Example: `  zkr set /app/config '{"replicas": 3}'
  zkr set /app/config - < config.json
  zkr set /app/config v2 --version 4`,
		Args: pathAndValue(false),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := args[0]
			data, err := a.value(args[1])
			if err != nil {
				return err
			}
			return a.withSession(cmd, "set "+path, func(ctx context.Context, s *zkrecipes.Session) error {
				st, err := s.Set(ctx, path, data, version)
				if err == nil {
					a.logf(cmd, "%s is at version %d", path, st.Version)
				}
				return err
			})
		},
	}
	cmd.Flags().Int32Var(&version, "version", -1, "write only if the node is at this data version (-1: any)")
	return cmd
}

func (a *app) newCreateCmd() *cobra.Command {
	var parents, sequential, container bool
	var ttl time.Duration
	cmd := &cobra.Command{
		Use:   "create PATH [VALUE|-]",
		Short: "Create a node",
		Long: `Create PATH with VALUE (or standard input, for -; no VALUE: no data at all) and
print the path created, which for --sequential ends in the sequence number the
server appended. -p creates missing parents first. --container makes a node the
server deletes once its last child is gone; --ttl one it deletes once it has had
no change and no child for that long (the server needs extendedTypesEnabled).
There is no ephemeral mode: zkr's session, and the node with it, would end at
once.`,
		Example: `  zkr create -p /app/config/db primary
  zkr create --sequential /jobs/job- - < job.json`,
		Args: pathAndValue(true),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := args[0]
			var data []byte
			if len(args) == 2 {
				var err error
				if data, err = a.value(args[1]); err != nil {
					return err
				}
			}
			mode := zkclient.Persistent
			switch {
			case container && (sequential || ttl != 0):
				return usagef("--container cannot be combined with --sequential or --ttl")
			case ttl < 0:
				return usagef("--ttl %v: must be positive", ttl)
			case container:
				mode = zkclient.Container
			case sequential && ttl > 0:
				mode = zkclient.PersistentSequentialWithTTL
			case sequential:
				mode = zkclient.PersistentSequential
			case ttl > 0:
				mode = zkclient.PersistentWithTTL
			}
			return a.withSession(cmd, "create "+path, func(ctx context.Context, s *zkrecipes.Session) error {
				if parents {
					if err := s.CreateParents(ctx, path, zkclient.Persistent, nil); err != nil {
						return err
					}
				}
				created, err := s.CreateTTL(ctx, path, data, mode, nil, ttl)
				switch {
				case errors.Is(err, zkclient.ErrNodeExists):
					return codef(exitFailure, "create %s: the node already exists", path)
				case errors.Is(err, zkclient.ErrNoNode):
					return codef(exitFailure, "create %s: the parent does not exist (use -p to create it)", path)
				case errors.Is(err, zkclient.ErrUnimplemented) && ttl > 0:
					return codef(exitFailure, "create %s: the server does not allow TTL nodes (zookeeper.extendedTypesEnabled=true)", path)
				case err != nil:
					return err
				}
				fmt.Fprintln(a.stdout, created.Path)
				return nil
			})
		},
	}
	f := cmd.Flags()
	f.BoolVarP(&parents, "parents", "p", false, "create missing parents first (persistent, empty)")
	f.BoolVar(&sequential, "sequential", false, "append the parent's next sequence number to the name")
	f.BoolVar(&container, "container", false, "a container node, deleted by the server once its last child is")
	f.DurationVar(&ttl, "ttl", 0, "a TTL node, deleted by the server after this long without change or child")
	return cmd
}

func (a *app) newRmCmd() *cobra.Command {
	var recursive bool
	var version int32
	cmd := &cobra.Command{
		Use:   "rm PATH",
		Short: "Delete a node (with -r, everything under it too)",
		Long: `Delete PATH. A node with children is refused unless -r is given, which deletes
everything under PATH first (not atomically: it stops at the first failure).
With --version, delete only if the node is still at that data version.`,
		Example: `  zkr rm /app/config/old
  zkr rm -r /app/scratch`,
		Args: onePath,
		RunE: func(cmd *cobra.Command, args []string) error {
			path := args[0]
			if recursive && version != -1 {
				return usagef("--version cannot be combined with -r")
			}
			return a.withSession(cmd, "rm "+path, func(ctx context.Context, s *zkrecipes.Session) error {
				if recursive {
					return s.DeleteTree(ctx, path)
				}
				return s.Delete(ctx, path, version)
			})
		},
	}
	cmd.Flags().BoolVarP(&recursive, "recursive", "r", false, "delete every node under PATH first")
	cmd.Flags().Int32Var(&version, "version", -1, "delete only if the node is at this data version (-1: any)")
	return cmd
}

// pathAndValue checks the arguments "PATH VALUE" (with optional, "PATH"
// alone too).
func pathAndValue(optional bool) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		switch {
		case len(args) == 0:
			return usagef("missing PATH")
		case len(args) == 1 && !optional:
			return usagef("missing VALUE after PATH (use - to read it from standard input)")
		case len(args) > 2:
			return usagef("expected PATH and one VALUE, got %d arguments: %q (quote a value with spaces)", len(args), args)
		}
		return nil
	}
}
