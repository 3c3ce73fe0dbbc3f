package main

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/zkrecipes/zkrecipes"
)

// diffEntry is one difference between two subtrees.
type diffEntry struct {
	Status  string   `json:"status"` // added, removed, changed
	Path    string   `json:"path"`   // relative to the compared paths: "/" is the paths themselves
	Changes []string `json:"changes,omitempty"`
}

func (a *app) newDiffCmd() *cobra.Command {
	var to string
	var ephemerals, asJSON bool
	cmd := &cobra.Command{
		Use:   "diff PATH1 [PATH2]",
		Short: "Compare two subtrees (data, ACLs, modes), here or on another cluster",
		Long: `Compare the subtree at PATH1 with the one at PATH2 (PATH1 if not given) and
print their differences, one a line as status<TAB>path[<TAB>changes]: removed
(only under PATH1), added (only under PATH2) or changed, with what changed:
data (null and empty data differ), acl (in any order), mode (ephemeral or
not; ZooKeeper does not tell containers and TTL nodes from persistent ones).
A digest entry whose hash the server hides (without the admin permission)
compares by user name only. Paths are relative to PATH1 and PATH2, "/" being
those nodes themselves. With --to, PATH2 is read on the cluster of those
servers (with the same credentials and TLS settings); without, on the same
one. Ephemeral nodes are left out, as export leaves them, unless
--ephemerals is given (their owners are not compared). With --json, print
{from, to, differences: [{status, path, changes}]}.

Exit status: 0 when the subtrees are the same, 1 when they differ, as
diff(1) does (1 also for a ZooKeeper error, which prints a message on
standard error); 2 for bad input.`,
		Example: `  zkr diff /app /staging/app
  zkr diff /app --to dr-zk1:2181,dr-zk2:2181
  zkr export /app > app.json && zkr --servers new:2181 import app.json && zkr diff /app --to new:2181`,
		Args: func(cmd *cobra.Command, args []string) error {
			switch {
			case len(args) == 0:
				return usagef("missing PATH1")
			case len(args) > 2:
				return usagef("expected PATH1 and at most PATH2, got %d arguments: %q", len(args), args)
			case len(args) == 1 && to == "":
				return usagef("one PATH compares with the same path on another cluster: give --to SERVERS, or a second PATH")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			from, other := args[0], args[0]
			if len(args) == 2 {
				other = args[1]
			}
			opts := readOpts{data: true, acl: true}
			what := "diff " + strings.Join(args, " ")
			var differences []diffEntry
			err := a.withSession(cmd, what, func(ctx context.Context, s *zkrecipes.Session) error {
				if err := s.Sync(ctx, from); err != nil {
					return err
				}
				left, _, err := readTree(ctx, s, from, opts)
				if err != nil {
					return err
				}
				s2 := s
				if to != "" {
					saved := a.servers
					a.servers = to
					s2, err = a.connect(ctx, false)
					a.servers = saved
					if err != nil {
						return err
					}
					defer closeSession(s2)
				}
				if err := s2.Sync(ctx, other); err != nil {
					return err
				}
				right, _, err := readTree(ctx, s2, other, opts)
				if err != nil {
					return err
				}
				differences = diffTrees(from, left, other, right, ephemerals)
				return nil
			})
			if err != nil {
				return err
			}
			if asJSON {
				if differences == nil {
					differences = []diffEntry{}
				}
				a.printJSON(struct {
					From        string      `json:"from"`
					To          string      `json:"to"`
					Differences []diffEntry `json:"differences"`
				}{from, other, differences})
			} else {
				for _, d := range differences {
					if len(d.Changes) == 0 {
						fmt.Fprintf(a.stdout, "%s\t%s\n", d.Status, d.Path)
						continue
					}
					fmt.Fprintf(a.stdout, "%s\t%s\t%s\n", d.Status, d.Path, strings.Join(d.Changes, ","))
				}
			}
			if len(differences) > 0 {
				return status(exitFailure)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&to, "to", "", "read PATH2 on these servers (host:port,...[/chroot]), another cluster")
	f.BoolVar(&ephemerals, "ephemerals", false, "compare ephemeral nodes too")
	f.BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// diffTrees compares two subtrees read by readTree, by path relative to
// their roots, in path order.
func diffTrees(leftRoot string, left []*treeNode, rightRoot string, right []*treeNode, ephemerals bool) []diffEntry {
	index := func(root string, nodes []*treeNode) map[string]*treeNode {
		m := map[string]*treeNode{}
		for _, n := range nodes {
			if n.Mode == modeEphemeral && !ephemerals {
				continue
			}
			m[relPath(root, n.Path)] = n
		}
		return m
	}
	l, r := index(leftRoot, left), index(rightRoot, right)
	var paths []string
	for p := range l {
		paths = append(paths, p)
	}
	for p := range r {
		if _, ok := l[p]; !ok {
			paths = append(paths, p)
		}
	}
	slices.SortFunc(paths, comparePaths)
	var out []diffEntry
	for _, p := range paths {
		a, inL := l[p]
		b, inR := r[p]
		switch {
		case !inR:
			out = append(out, diffEntry{Status: "removed", Path: p})
		case !inL:
			out = append(out, diffEntry{Status: "added", Path: p})
		default:
			if ch := nodeChanges(a, b); len(ch) > 0 {
				out = append(out, diffEntry{Status: "changed", Path: p, Changes: ch})
			}
		}
	}
	return out
}
