package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/zkrecipes/zkrecipes"
)

// The operator's questions to a server: whoami, sync, count, ephemerals.

// printJSON prints v as one line of JSON.
func (a *app) printJSON(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return codef(exitFailure, "encoding JSON: %v", err)
	}
	fmt.Fprintf(a.stdout, "%s\n", b)
	return nil
}

// sessionIDHex is a session id as ZooKeeper's logs and zkCli.sh show it.
func sessionIDHex(id int64) string { return "0x" + strconv.FormatUint(uint64(id), 16) }

// identityView is one identity of the session, as whoami --json prints it.
type identityView struct {
	Scheme string `json:"scheme"`
	ID     string `json:"id"`
}

func (a *app) newWhoAmICmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "whoami",
		Short: "Print the identities the server authenticated zkr's session as",
		Long: `Print the identities the server knows zkr's session by, one a line as
scheme<TAB>id: ip and the client's address always, digest with --auth, sasl
with --sasl-user or --kerberos-principal, x509 with a client certificate; the
ids an ACL entry must name to grant this session anything. With --json, print
{session, server, identities: [{scheme, id}]}. Needs ZooKeeper 3.7 or later.`,
		Example: `  zkr --auth alice:secret whoami`,
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withSession(cmd, "whoami", func(ctx context.Context, s *zkrecipes.Session) error {
				ids, err := s.Client().WhoAmI(ctx)
				if err != nil {
					return err
				}
				out := make([]identityView, len(ids))
				for i, id := range ids {
					out[i] = identityView{Scheme: id.Scheme, ID: id.User}
				}
				if asJSON {
					return a.printJSON(struct {
						Session    string         `json:"session"`
						Server     string         `json:"server"`
						Identities []identityView `json:"identities"`
					}{sessionIDHex(s.ID()), s.Server(), out})
				}
				for _, id := range out {
					fmt.Fprintf(a.stdout, "%s\t%s\n", id.Scheme, id.ID)
				}
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func (a *app) newSyncCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "sync [PATH]",
		Short: "Make the server zkr is connected to catch up with the leader",
		Long: `Send ZooKeeper's sync for PATH ("/" if none) and wait for it: the server zkr
is connected to answers once it has applied every write the ensemble's leader
had committed when it got the sync. zkr's session ends right after, so what it
proves is that this server is in touch with a working leader and up to date;
a server cut off from the quorum does not answer (exit status 1 or 6). Prints
the server that answered, or {path, server} with --json.`,
		Example: `  zkr --servers zk3:2181 sync`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 1 {
				return usagef("expected at most one PATH, got %d: %q", len(args), args)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			path := "/"
			if len(args) == 1 {
				path = args[0]
			}
			return a.withSession(cmd, "sync "+path, func(ctx context.Context, s *zkrecipes.Session) error {
				if err := s.Sync(ctx, path); err != nil {
					return err
				}
				if asJSON {
					return a.printJSON(struct {
						Path   string `json:"path"`
						Server string `json:"server"`
					}{path, s.Server()})
				}
				fmt.Fprintf(a.stdout, "%s\n", s.Server())
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func (a *app) newCountCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "count PATH",
		Short: "Count the nodes under a node, at every depth",
		Long: `Print the number of nodes under PATH, at every depth (PATH itself not
counted), as the server counts them in one request (getAllChildrenNumber,
ZooKeeper 3.6 or later). With --json, print {path, descendants}.`,
		Example: `  zkr count /app
  zkr count / --json`,
		Args: onePath,
		RunE: func(cmd *cobra.Command, args []string) error {
			path := args[0]
			return a.withSession(cmd, "count "+path, func(ctx context.Context, s *zkrecipes.Session) error {
				n, err := s.Client().AllChildrenNumber(ctx, path)
				if err != nil {
					return err
				}
				if asJSON {
					return a.printJSON(struct {
						Path        string `json:"path"`
						Descendants int    `json:"descendants"`
					}{path, n})
				}
				fmt.Fprintln(a.stdout, n)
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// ephemeralView is an ephemeral node as ephemerals --json prints it.
type ephemeralView struct {
	Path    string `json:"path"`
	Session string `json:"session"`
}

func (a *app) newEphemeralsCmd() *cobra.Command {
	var asJSON bool
	var session string
	cmd := &cobra.Command{
		Use:   "ephemerals [PATH]",
		Short: "List the ephemeral nodes under a node and the sessions owning them",
		Long: `List the ephemeral nodes under PATH ("/" if none; PATH itself included), in
path order, one a line as path<TAB>session, the session that owns the node
(and whose end deletes it), in hex as ZooKeeper logs it. --session keeps the
nodes of that session only. With --json, print a list of {path, session}.

ZooKeeper's own getEphemerals answers for the asking session only, which for
zkr is always a new one; so zkr reads the tree instead, one listing per node
under PATH: on a large tree, give the narrowest PATH.`,
		Example: `  zkr ephemerals /services
  zkr ephemerals --session 0x1000a3c5e2f0003`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 1 {
				return usagef("expected at most one PATH, got %d: %q", len(args), args)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			path := "/"
			if len(args) == 1 {
				path = args[0]
			}
			var want int64
			if session != "" {
				id, err := parseSessionID(session)
				if err != nil {
					return err
				}
				want = id
			}
			return a.withSession(cmd, "ephemerals "+path, func(ctx context.Context, s *zkrecipes.Session) error {
				nodes, _, err := readTree(ctx, s, path, readOpts{})
				if err != nil {
					return err
				}
				out := []ephemeralView{}
				for _, n := range nodes {
					if n.Mode == modeEphemeral && (want == 0 || n.session == want) {
						out = append(out, ephemeralView{Path: n.Path, Session: sessionIDHex(n.session)})
					}
				}
				if asJSON {
					return a.printJSON(out)
				}
				for _, e := range out {
					fmt.Fprintf(a.stdout, "%s\t%s\n", e.Path, e.Session)
				}
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().StringVar(&session, "session", "", "only the nodes of this session (hex with 0x, as zkr stat's ephemeralOwner shows it, or decimal)")
	return cmd
}

// parseSessionID parses a session id, hex with 0x or decimal.
func parseSessionID(s string) (int64, error) {
	var v uint64
	var err error
	if len(s) > 2 && (s[:2] == "0x" || s[:2] == "0X") {
		v, err = strconv.ParseUint(s[2:], 16, 64)
	} else {
		var d int64
		d, err = strconv.ParseInt(s, 10, 64)
		v = uint64(d)
	}
	if err != nil || v == 0 {
		return 0, usagef("--session %q: not a session id (hex with 0x, as zkr stat shows ephemeralOwner, or decimal)", s)
	}
	return int64(v), nil
}
