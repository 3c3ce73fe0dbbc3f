package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/zkrecipes/zkrecipes"
	"github.com/zkrecipes/zkrecipes/internal/zkpath"
	"github.com/zkrecipes/zkrecipes/zkclient"
)

// The tree commands: export and import, with the format they share.

// exportFormat names the version of export's format; import refuses others.
const exportFormat = "zkr-export/1"

// treeExport is what export writes and import reads.
type treeExport struct {
	Format  string        `json:"format"`
	Path    string        `json:"path"`
	Nodes   []*treeNode   `json:"nodes"`
	Skipped []skippedNode `json:"skipped,omitempty"`
}

// skippedNode is a node export left out, and why.
type skippedNode struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

const exportLong = `Write the subtree at PATH (PATH included) as JSON on standard output, for
import to create again, here or on another cluster:

  {"format": "zkr-export/1", "path": PATH,
   "nodes": [{"path", "data", "acl": [{"scheme", "id", "perms"}], "mode", "ttl_ms"}],
   "skipped": [{"path", "reason"}]}

one node a line, parents before children. data is base64 (null for a node
created with no data, "" for empty data); perms are letters of cdrwa as in
acl get; mode is persistent, container or ttl (with ttl_ms, the TTL in
milliseconds), and import creates each node in its mode. But export writes
persistent for containers and TTL nodes too: ZooKeeper does not tell a
client which nodes are containers or TTL nodes, nor their TTL (a Stat shows
ephemeralOwner 0 for them), so no client can export them as such. Edit the
file to give them back their mode ("mode": "container", or "mode": "ttl",
"ttl_ms": 3600000) before an import. A sequential node is written under its
full name and created again under it, as a plain node. Ephemeral nodes are
left out (they belong to a session, and end with it) and listed in skipped
and on standard error, as is /zookeeper (the server's own) when PATH is /.

Every node must be readable: export fails on a node whose ACL refuses this
session read, and on a digest entry whose password hash the server hides
(without the admin permission on the node): an import could not give it back.
ZooKeeper has no point-in-time read: export first syncs with the leader, then
reads each node in turn, so a tree changing meanwhile is exported as each
node was when read.`

func (a *app) newExportCmd() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:     "export PATH",
		Short:   "Write a subtree (data, ACLs, modes) as JSON, for import",
		Long:    exportLong,
		Example: "  zkr export /app > app.json\n  zkr --servers old:2181 export / -o all.json",
		Args:    onePath,
		RunE: func(cmd *cobra.Command, args []string) error {
			path := args[0]
			return a.withSession(cmd, "export "+path, func(ctx context.Context, s *zkrecipes.Session) error {
				x, err := exportTree(ctx, s, path)
				if err != nil {
					return err
				}
				for _, sk := range x.Skipped {
					fmt.Fprintf(a.stderr, "%s: skipped %s: %s\n", cmd.CommandPath(), sk.Path, sk.Reason)
				}
				var hidden []string
				for _, n := range x.Nodes {
					for _, e := range n.ACL {
						if e.Scheme == "digest" && strings.HasSuffix(e.ID, ":x") {
							hidden = append(hidden, n.Path)
							break
						}
					}
				}
				if len(hidden) > 0 {
					return codef(exitFailure, "export %s: the server hides the digest password hashes of the ACL of %s (this session lacks the admin permission there): an import could not restore it; export with credentials that have it (--auth)", path, listSome(hidden))
				}
				w := a.stdout
				if output != "" {
					f, err := os.Create(output)
					if err != nil {
						return usagef("-o %q: %v", output, err)
					}
					defer f.Close()
					w = f
				}
				if err := writeExport(w, x); err != nil {
					return codef(exitFailure, "export %s: writing: %v", path, err)
				}
				if f, ok := w.(*os.File); ok && output != "" {
					if err := f.Close(); err != nil {
						return codef(exitFailure, "export %s: writing %s: %v", path, output, err)
					}
				}
				a.logf(cmd, "%d nodes exported, %d skipped", len(x.Nodes), len(x.Skipped))
				return nil
			})
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "write to this file instead of standard output")
	return cmd
}

// exportTree reads the subtree at root as export writes it.
func exportTree(ctx context.Context, s *zkrecipes.Session, root string) (*treeExport, error) {
	if err := s.Sync(ctx, root); err != nil {
		return nil, err
	}
	nodes, sys, err := readTree(ctx, s, root, readOpts{data: true, acl: true})
	if err != nil {
		return nil, err
	}
	x := &treeExport{Format: exportFormat, Path: root, Nodes: []*treeNode{}}
	for _, p := range sys {
		x.Skipped = append(x.Skipped, skippedNode{Path: p, Reason: "the server's own"})
	}
	for _, n := range nodes {
		if n.Mode == modeEphemeral {
			x.Skipped = append(x.Skipped, skippedNode{Path: n.Path, Reason: "ephemeral, of session " + sessionIDHex(n.session)})
			continue
		}
		x.Nodes = append(x.Nodes, n)
	}
	return x, nil
}

// writeExport writes x one node a line.
func writeExport(w io.Writer, x *treeExport) error {
	var b bytes.Buffer
	head, _ := json.Marshal(struct {
		Format string `json:"format"`
		Path   string `json:"path"`
	}{x.Format, x.Path})
	b.Write(head[:len(head)-1])
	b.WriteString(",\"nodes\":[")
	for i, n := range x.Nodes {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("\n")
		line, err := json.Marshal(n)
		if err != nil {
			return err
		}
		b.Write(line)
	}
	b.WriteString("\n]")
	if len(x.Skipped) > 0 {
		sk, _ := json.Marshal(x.Skipped)
		b.WriteString(",\"skipped\":")
		b.Write(sk)
	}
	b.WriteString("}\n")
	_, err := w.Write(b.Bytes())
	return err
}

// readExport reads and checks an export: the format, every path under the
// export's path, parents listed before their children, modes and ACLs
// valid. name names the file in errors.
func readExport(r io.Reader, name string) (*treeExport, error) {
	var x treeExport
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&x); err != nil {
		return nil, fmt.Errorf("%s: not a zkr export: %w", name, err)
	}
	if x.Format != exportFormat {
		return nil, fmt.Errorf("%s: format %q, expected %q (written by zkr export)", name, x.Format, exportFormat)
	}
	if err := zkpath.Check(x.Path); err != nil {
		return nil, fmt.Errorf("%s: path %q: %w", name, x.Path, err)
	}
	seen := map[string]bool{}
	for i, n := range x.Nodes {
		if n == nil {
			return nil, fmt.Errorf("%s: node %d is null", name, i+1)
		}
		where := fmt.Sprintf("%s: node %d (%s)", name, i+1, n.Path)
		if err := zkpath.Check(n.Path); err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		switch {
		case n.Path != x.Path && !strings.HasPrefix(n.Path, strings.TrimSuffix(x.Path, "/")+"/"):
			return nil, fmt.Errorf("%s: not under the export's path %s", where, x.Path)
		case seen[n.Path]:
			return nil, fmt.Errorf("%s: listed twice", where)
		case n.Path != x.Path && !seen[zkpath.Parent(n.Path)]:
			return nil, fmt.Errorf("%s: its parent is not listed before it", where)
		case i == 0 && n.Path != x.Path:
			return nil, fmt.Errorf("%s: the first node must be the export's path %s", where, x.Path)
		}
		seen[n.Path] = true
		switch n.Mode {
		case modePersistent, modeContainer:
			if n.TTL != 0 {
				return nil, fmt.Errorf("%s: ttl_ms given for a %s node", where, n.Mode)
			}
		case modeTTL:
			if n.TTL <= 0 || n.TTL > maxTTL {
				return nil, fmt.Errorf("%s: ttl_ms %d: must be from 1 to %d", where, n.TTL, maxTTL)
			}
		default:
			return nil, fmt.Errorf("%s: mode %q: expected persistent, container or ttl", where, n.Mode)
		}
		if _, err := clientACL(where, n.ACL); err != nil {
			return nil, err
		}
	}
	return &x, nil
}

// importStep is one thing import does (or, with --dry-run, would do).
type importStep struct {
	Action  string   `json:"action"` // create, create-parent, update, unchanged, conflict
	Path    string   `json:"path"`
	Mode    string   `json:"mode,omitempty"`
	Changes []string `json:"changes,omitempty"` // of update and conflict: data, acl, mode

	node *treeNode
}

const importLong = `Create the nodes of FILE, written by zkr export ("-": standard input), with
their data, ACLs and modes, parents first: at the paths they were exported
from, or with --under DEST under DEST (/app exported, imported --under
/staging, is /staging/app). Missing ancestors of the first node are created
as with create -p (persistent, empty, open).

A node that exists already with the same data, ACL and mode is left alone,
so an import cut short can be run again. One that differs stops the import
before anything is changed, unless --overwrite is given, which replaces its
data and ACL; an ephemeral node where the file has another cannot be
changed in place: delete it first. (ZooKeeper does not tell a client whether
a node is a container or a TTL node: an existing node is taken to be of the
file's mode.) Nodes that
exist but are not in FILE are left alone. --dry-run prints what would be done
and changes nothing.

Prints one line per node: action<TAB>path[<TAB>mode or changes], the action
being create, create-parent, update, unchanged or conflict; with --json,
{dry_run, steps: [{action, path, mode, changes}]}. Each node is created with
its own ACL, so the session needs the create permission on each imported
parent by that parent's ACL: import with the credentials named there (--auth).
The creates are not one transaction: a failure stops the import there, and
what was created stays.`

func (a *app) newImportCmd() *cobra.Command {
	var under string
	var dryRun, overwrite, asJSON bool
	cmd := &cobra.Command{
		Use:   "import FILE",
		Short: "Create the nodes of an export (data, ACLs, modes)",
		Long:  importLong,
		Example: `  zkr import app.json --dry-run
  zkr --servers new:2181 import app.json
  zkr export /app | zkr import - --under /staging`,
		Args: func(cmd *cobra.Command, args []string) error {
			switch {
			case len(args) == 0:
				return usagef("missing FILE (written by zkr export; - for standard input)")
			case len(args) > 1:
				return usagef("expected one FILE, got %d: %q", len(args), args)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			var r io.Reader = a.stdin
			if name == "-" {
				name = "standard input"
			} else {
				f, err := os.Open(name)
				if err != nil {
					return usagef("%v", err)
				}
				defer f.Close()
				r = f
			}
			x, err := readExport(r, name)
			if err != nil {
				return usagef("%v", err)
			}
			if under != "" {
				if err := zkpath.Check(under); err != nil {
					return usagef("--under %q: %v", under, err)
				}
				for _, n := range x.Nodes {
					n.Path = underPath(under, n.Path)
				}
			}
			what := "import " + args[0]
			return a.withSession(cmd, what, func(ctx context.Context, s *zkrecipes.Session) error {
				steps, err := planImport(ctx, s, x.Nodes)
				if err != nil {
					return err
				}
				var conflicts []string
				for i, st := range steps {
					if st.Action == "conflict" && (overwrite && !slices.Contains(st.Changes, "mode")) {
						steps[i].Action = "update"
					}
					if steps[i].Action == "conflict" {
						conflicts = append(conflicts, st.Path)
					}
				}
				if len(conflicts) > 0 || dryRun {
					a.printSteps(steps, dryRun, asJSON)
				}
				if len(conflicts) > 0 {
					hint := "--overwrite replaces their data and ACL"
					if overwrite {
						hint = "they are ephemeral: delete them first"
					}
					return codef(exitFailure, "%s: %d nodes exist and differ (%s): nothing was changed; %s", what, len(conflicts), listSome(conflicts), hint)
				}
				if dryRun {
					return nil
				}
				for i, st := range steps {
					if err := applyStep(ctx, s, st); err != nil {
						a.printSteps(steps[:i], false, asJSON)
						return fmt.Errorf("stopped after %d of %d steps: %w", i, len(steps), err)
					}
				}
				a.printSteps(steps, false, asJSON)
				return nil
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&under, "under", "", "create the tree under this path instead of where it was exported from")
	f.BoolVar(&dryRun, "dry-run", false, "print what would be done; change nothing")
	f.BoolVar(&overwrite, "overwrite", false, "replace the data and ACL of existing nodes that differ")
	f.BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// planImport compares nodes with what exists and returns one step per
// node, after one create-parent step per missing ancestor of the first.
func planImport(ctx context.Context, s *zkrecipes.Session, nodes []*treeNode) ([]importStep, error) {
	var steps []importStep
	if len(nodes) == 0 {
		return nil, nil
	}
	var ancestors []string
	for p := zkpath.Parent(nodes[0].Path); p != "/" && p != ""; p = zkpath.Parent(p) {
		ancestors = append(ancestors, p)
	}
	slices.Reverse(ancestors)
	for _, p := range ancestors {
		_, ok, err := s.Exists(ctx, p)
		if err != nil {
			return nil, err
		}
		if !ok {
			steps = append(steps, importStep{Action: "create-parent", Path: p, Mode: modePersistent})
		}
	}
	missing := map[string]bool{} // a child of a missing node is missing too: no read
	for _, n := range nodes {
		step := importStep{Action: "create", Path: n.Path, Mode: modeString(n), node: n}
		if missing[zkpath.Parent(n.Path)] {
			missing[n.Path] = true
			steps = append(steps, step)
			continue
		}
		data, st, err := s.Get(ctx, n.Path)
		if errors.Is(err, zkclient.ErrNoNode) {
			missing[n.Path] = true
			steps = append(steps, step)
			continue
		}
		if err != nil {
			return nil, err
		}
		acl, _, err := s.GetACL(ctx, n.Path)
		if err != nil {
			return nil, err
		}
		have := &treeNode{Path: n.Path, Data: data, ACL: viewACL(acl)}
		have.Mode, have.session = nodeMode(st.EphemeralOwner)
		step.Changes = nodeChanges(have, n)
		step.Action = "unchanged"
		if len(step.Changes) > 0 {
			step.Action = "conflict"
		}
		steps = append(steps, step)
	}
	return steps, nil
}

// applyStep does one step of an import.
func applyStep(ctx context.Context, s *zkrecipes.Session, st importStep) error {
	switch st.Action {
	case "create-parent":
		_, err := s.Create(ctx, st.Path, nil, zkclient.Persistent, nil)
		if errors.Is(err, zkclient.ErrNodeExists) {
			return nil // made meanwhile: what is wanted
		}
		return err
	case "create":
		n := st.node
		acl, _ := clientACL(n.Path, n.ACL) // checked by readExport
		mode := zkclient.Persistent
		switch n.Mode {
		case modeContainer:
			mode = zkclient.Container
		case modeTTL:
			mode = zkclient.PersistentWithTTL
		}
		_, err := s.CreateTTL(ctx, n.Path, n.Data, mode, acl, time.Duration(n.TTL)*time.Millisecond)
		if errors.Is(err, zkclient.ErrUnimplemented) && mode == zkclient.PersistentWithTTL {
			return fmt.Errorf("%w (the server does not allow TTL nodes: zookeeper.extendedTypesEnabled=true)", err)
		}
		return err
	case "update":
		n := st.node
		if slices.Contains(st.Changes, "data") {
			if _, err := s.Set(ctx, n.Path, n.Data, -1); err != nil {
				return err
			}
		}
		if slices.Contains(st.Changes, "acl") {
			acl, _ := clientACL(n.Path, n.ACL)
			if _, err := s.SetACL(ctx, n.Path, acl, -1); err != nil {
				return err
			}
		}
	}
	return nil
}

// nodeChanges lists what differs between two nodes: data (null and empty
// differ), acl (in any order), mode. The mode compared is only whether a
// node is ephemeral: a node read from a server reads as persistent when it
// is a container or a TTL node too (see nodeMode).
func nodeChanges(a, b *treeNode) []string {
	var out []string
	if !bytes.Equal(a.Data, b.Data) || (a.Data == nil) != (b.Data == nil) {
		out = append(out, "data")
	}
	if !sameACL(a.ACL, b.ACL) {
		out = append(out, "acl")
	}
	if (a.Mode == modeEphemeral) != (b.Mode == modeEphemeral) {
		out = append(out, "mode")
	}
	return out
}

// modeString is a node's mode as import and diff print it: "ttl=1h0m0s".
func modeString(n *treeNode) string {
	if n.Mode == modeTTL {
		return modeTTL + "=" + (time.Duration(n.TTL) * time.Millisecond).String()
	}
	return n.Mode
}

// printSteps prints an import's steps, one a line or as JSON.
func (a *app) printSteps(steps []importStep, dryRun, asJSON bool) {
	if asJSON {
		if steps == nil {
			steps = []importStep{}
		}
		a.printJSON(struct {
			DryRun bool         `json:"dry_run"`
			Steps  []importStep `json:"steps"`
		}{dryRun, steps})
		return
	}
	for _, st := range steps {
		detail := st.Mode
		if len(st.Changes) > 0 {
			detail = strings.Join(st.Changes, ",")
		}
		fmt.Fprintf(a.stdout, "%s\t%s\t%s\n", st.Action, st.Path, detail)
	}
}

// listSome lists paths, the first few of them.
func listSome(paths []string) string {
	const few = 5
	if len(paths) <= few {
		return strings.Join(paths, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(paths[:few], ", "), len(paths)-few)
}
