package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"unicode"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/zkrecipes/zkrecipes"
)

func (a *app) newWatchCmd() *cobra.Command {
	var node, asJSON bool
	cmd := &cobra.Command{
		Use:   "watch PATH",
		Short: "Follow a node and the nodes below it, printing each change",
		Long: `Follow the node PATH and every node below it (only PATH with --node) through
a cache on one persistent recursive watch, and print one line per change until
interrupted: first "created" for every node there is, parents first, then
"initialized", then "created", "changed" or "deleted" as nodes come, change
and go. Each line gives the change, the path, the node's data version and its
data (quoted when not printable text). PATH need not exist yet.

Changes that follow each other faster than zkr reads them, or while its
connection is down, are merged: the line shows the version zkr read. After a
reconnection zkr reads the whole tree again and prints what differs. Every
line is a state the node really had, and a node's versions only move forward.

With --json, each line is an object: {"type", "path", "version", "czxid",
"mzxid", "data"} ("data_base64" instead of "data" when the data is not UTF-8).

Exit status: 0 when interrupted (SIGINT, SIGTERM), 1 if the session expired,
2 bad input, 6 no connection to ZooKeeper.`,
		Example: `  zkr watch /app/config
  zkr watch /app/config/db --node
  zkr watch /services --json | jq .`,
		Args: onePath,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.session(cmd, nil, func(ctx context.Context, s *zkrecipes.Session) error {
				return a.watch(ctx, s, args[0], node, asJSON)
			})
		},
	}
	cmd.Flags().BoolVar(&node, "node", false, "follow PATH only, not the nodes below it")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object per change")
	return cmd
}

// watchLine is one change as zkr watch --json prints it.
type watchLine struct {
	Type       string  `json:"type"`
	Path       string  `json:"path"`
	Version    *int32  `json:"version,omitempty"`
	Czxid      int64   `json:"czxid,omitempty"`
	Mzxid      int64   `json:"mzxid,omitempty"`
	Data       *string `json:"data,omitempty"`
	DataBase64 string  `json:"data_base64,omitempty"`
}

// watch prints the changes of path (and below it, unless node) until ctx
// is cancelled.
func (a *app) watch(ctx context.Context, s *zkrecipes.Session, path string, node, asJSON bool) error {
	var opts []zkrecipes.CacheOption
	if node {
		opts = append(opts, zkrecipes.WithSingleNode())
	}
	a.metrics.waiting("reading the tree under " + path)
	c, err := zkrecipes.NewCache(ctx, s, path, opts...)
	if err != nil {
		return recipeError("watch "+path, err)
	}
	defer c.Close()
	for {
		ev, err := c.Next(ctx)
		if err != nil {
			return withCode(exitFailure, fmt.Errorf("watching %s: %w", path, err))
		}
		if ev.Type == zkrecipes.CacheInitialized {
			a.metrics.readyUntil(nil, "")
		}
		if asJSON {
			b, _ := json.Marshal(jsonLine(ev)) // strings and numbers only: cannot fail
			fmt.Fprintf(a.stdout, "%s\n", b)
			continue
		}
		if ev.Type == zkrecipes.CacheInitialized {
			fmt.Fprintf(a.stdout, "%v %s\n", ev.Type, ev.Path)
			continue
		}
		fmt.Fprintf(a.stdout, "%v %s v%d %s\n", ev.Type, ev.Path, ev.Stat.Version, shownData(ev.Data))
	}
}

func jsonLine(ev zkrecipes.CacheEvent) watchLine {
	l := watchLine{Type: ev.Type.String(), Path: ev.Path}
	if ev.Type == zkrecipes.CacheInitialized {
		return l
	}
	v := ev.Stat.Version
	l.Version, l.Czxid, l.Mzxid = &v, ev.Stat.Czxid, ev.Stat.Mzxid
	if utf8.Valid(ev.Data) {
		d := string(ev.Data)
		l.Data = &d
	} else {
		l.DataBase64 = base64.StdEncoding.EncodeToString(ev.Data)
	}
	return l
}

// shownData is data as a line shows it: as is when it is printable text
// without spaces at its ends, else Go-quoted.
func shownData(data []byte) string {
	s := string(data)
	if s == "" || !utf8.ValidString(s) || unicode.IsSpace(rune(s[0])) || unicode.IsSpace(rune(s[len(s)-1])) || s[0] == '"' {
		return strconv.Quote(s)
	}
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return strconv.Quote(s)
		}
	}
	return s
}
