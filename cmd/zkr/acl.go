package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/zkrecipes/zkrecipes"
)

// The acl commands: acl get, acl set.

func (a *app) newACLCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "acl",
		Short: "Read or replace a node's ACL",
		Long: `Read (acl get) or replace (acl set) the ACL of a node. An ACL entry is written
scheme:id:perms, perms being letters of c (create children), d (delete
children), r (read data and children), w (write data), a (admin: change the
ACL): world:anyone:r, digest:alice:HASH:cdrwa (HASH is
base64(sha1("alice:password"))), ip:10.0.0.0/8:r, sasl:alice:cdrwa,
x509:CN=client:r, and auth::cdrwa, which the server turns into every identity
the session authenticated as (--auth, --sasl-user, a client certificate).`,
		Example: `  zkr acl get /app/config
  zkr --auth admin:secret acl set /app/config auth::cdrwa,world:anyone:r`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return usagef("missing subcommand: get or set") },
	}
	cmd.AddCommand(a.newACLGetCmd(), a.newACLSetCmd())
	return cmd
}

// aclView is a node's ACL as acl get --json prints it.
type aclView struct {
	Path       string     `json:"path"`
	ACL        []aclEntry `json:"acl"`
	ACLVersion int32      `json:"aclVersion"`
}

func (a *app) newACLGetCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "get PATH",
		Short: "Print a node's ACL",
		Long: `Print the ACL of PATH, one entry a line as scheme:id:perms (the form acl set
takes). With --json, print {path, acl: [{scheme, id, perms}], aclVersion}. The
server hides the password hash of digest entries (id user:x) from a session
without the admin permission on the node.`,
		Example: `  zkr acl get /app/config
  zkr acl get /app/config --json`,
		Args: onePath,
		RunE: func(cmd *cobra.Command, args []string) error {
			path := args[0]
			return a.withSession(cmd, "acl get "+path, func(ctx context.Context, s *zkrecipes.Session) error {
				acl, st, err := s.GetACL(ctx, path)
				if err != nil {
					return err
				}
				if asJSON {
					return a.printJSON(aclView{Path: path, ACL: viewACL(acl), ACLVersion: st.Aversion})
				}
				for _, e := range viewACL(acl) {
					fmt.Fprintln(a.stdout, e)
				}
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func (a *app) newACLSetCmd() *cobra.Command {
	var version int32
	cmd := &cobra.Command{
		Use:   "set PATH ACL...",
		Short: "Replace a node's ACL",
		Long: `Replace the ACL of PATH with the entries given, each scheme:id:perms, as
separate arguments or separated by commas as zkCli.sh takes them. With
--version, replace it only if the node's ACL version (aclVersion, as acl get
--json and stat show it) is still that one. The session needs the admin
permission on the node.`,
		Example: `  zkr acl set /app/config world:anyone:r digest:admin:fvr2cB/fjGeAiX8g1aGhUm3ZICk=:cdrwa
  zkr --auth admin:secret acl set /app/config auth::cdrwa,world:anyone:r`,
		Args: func(cmd *cobra.Command, args []string) error {
			switch len(args) {
			case 0:
				return usagef("missing PATH")
			case 1:
				return usagef("missing ACL after PATH (scheme:id:perms, such as world:anyone:r)")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			path := args[0]
			entries, err := parseACL(args[1:])
			if err != nil {
				return usagef("%v", err)
			}
			acl, err := clientACL("acl set "+path, entries)
			if err != nil {
				return usagef("%v", err)
			}
			return a.withSession(cmd, "acl set "+path, func(ctx context.Context, s *zkrecipes.Session) error {
				st, err := s.SetACL(ctx, path, acl, version)
				if err == nil {
					a.logf(cmd, "%s is at ACL version %d", path, st.Aversion)
				}
				return err
			})
		},
	}
	cmd.Flags().Int32Var(&version, "version", -1, "replace the ACL only if it is at this ACL version (-1: any)")
	return cmd
}
