package kerberos_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/jcmturner/gokrb5/v8/client"
	"github.com/jcmturner/gokrb5/v8/config"
	"github.com/jcmturner/gokrb5/v8/keytab"

	"github.com/zkrecipes/zkrecipes/zkclient"
	"github.com/zkrecipes/zkrecipes/zkclient/kerberos"
)

// Log in from a keytab and connect to a ZooKeeper whose JAAS Server
// section logs in zookeeper/<host>; the session is then sasl:app@EXAMPLE.COM.
// (Not run: it needs a KDC and a Kerberized ZooKeeper.)
func ExampleGSSAPI() {
	cfg, err := config.Load("/etc/krb5.conf")
	if err != nil {
		log.Fatal(err)
	}
	kt, err := keytab.Load("/etc/app/app.keytab")
	if err != nil {
		log.Fatal(err)
	}
	cl := client.NewWithKeytab("app", "EXAMPLE.COM", kt, cfg, client.DisablePAFXFAST(true))
	defer cl.Destroy()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := zkclient.Connect(ctx, []string{"zk1.example.com:2181", "zk2.example.com:2181"},
		zkclient.WithSASL(kerberos.GSSAPI(cl)))
	if err != nil {
		log.Fatal(err) // errors.Is(err, zkclient.ErrAuthFailed) if refused
	}
	defer c.Close()
	who, _ := c.WhoAmI(ctx)
	fmt.Println(who)
}
