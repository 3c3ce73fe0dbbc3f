package zktest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// debianJar is where the Debian zookeeper package installs the server jar.
// Its manifest Class-Path names every dependency.
const debianJar = "/usr/share/java/zookeeper.jar"

// installHint tells a reader how to get ZooKeeper.
const installHint = "install it with `apt-get install -y zookeeper` or set ZOOKEEPER_HOME to an unpacked Apache ZooKeeper release"

// unavailableError reports that Java or ZooKeeper is not installed.
// SkipOrFail skips tests for it outside CI.
type unavailableError struct{ msg string }

func (e *unavailableError) Error() string { return "zktest: " + e.msg }

// jvm is what is needed to launch a ZooKeeper JVM.
type jvm struct {
	java      string
	classpath string
	netty     bool // the class path has what NettyServerCnxnFactory needs (Options.TLS)
}

// Available reports whether ZooKeeper can be started: it returns nil when a
// java binary and the ZooKeeper jars are found, and otherwise an error that
// says what is missing and how to install it.
//
// java is $ZKTEST_JAVA if set, else "java" on $PATH. The jars come from
// $ZOOKEEPER_HOME (lib/*.jar and *.jar) if set, else from the Debian
// package (/usr/share/java/zookeeper.jar).
//
// When [ServerEnv] selects the embedded server (ZKTEST_SERVER=zkserver,
// or unset while ZooKeeper is missing outside CI), a standalone server
// needs neither, and Available returns nil.
func Available() error {
	if kind, err := serverKind(); err != nil || kind == "zkserver" {
		return err
	}
	_, err := findJVM()
	return err
}

func findJVM() (jvm, error) {
	java, err := findJava()
	if err != nil {
		return jvm{}, err
	}
	cp, netty, err := findClasspath()
	if err != nil {
		return jvm{}, err
	}
	return jvm{java: java, classpath: cp, netty: netty}, nil
}

func findJava() (string, error) {
	if j := os.Getenv("ZKTEST_JAVA"); j != "" {
		p, err := exec.LookPath(j)
		if err != nil {
			return "", &unavailableError{fmt.Sprintf("ZKTEST_JAVA=%s is not executable: %v", j, err)}
		}
		return p, nil
	}
	p, err := exec.LookPath("java")
	if err != nil {
		return "", &unavailableError{"java not found on PATH (set ZKTEST_JAVA to a java binary); " + installHint + ", which pulls in Java"}
	}
	return p, nil
}

// debianNettyJars are the Netty jars (Debian package libnetty-java, a
// dependency of zookeeper) that NettyServerCnxnFactory and its TLS
// handler load. The manifest of the Debian zookeeper.jar names only
// some of them (buffer, common, handler, transport, epoll): it lacks
// codec, which SslHandler extends, resolver and the native epoll
// transport's unix-common.
var debianNettyJars = []string{
	"netty-buffer.jar",
	"netty-codec.jar",
	"netty-common.jar",
	"netty-handler.jar",
	"netty-resolver.jar",
	"netty-transport.jar",
	"netty-transport-native-epoll.jar",
	"netty-transport-native-unix-common.jar",
}

// nettyHint tells a reader how to get the Netty jars that Options.TLS needs.
const nettyHint = "install them with `apt-get install -y libnetty-java`, or use a ZooKeeper release, whose lib/ has them"

// findClasspath returns ZooKeeper's class path and whether it has the
// jars that Netty's connection factory, and so Options.TLS, needs.
func findClasspath() (cp string, netty bool, err error) {
	if home := os.Getenv("ZOOKEEPER_HOME"); home != "" {
		return homeClasspath(home)
	}
	if _, err := os.Stat(debianJar); err != nil {
		return "", false, &unavailableError{fmt.Sprintf("ZooKeeper not found (%s missing and ZOOKEEPER_HOME unset); %s", debianJar, installHint)}
	}
	jars := []string{debianJar}
	dir := filepath.Dir(debianJar)
	// The Debian jar names no logging backend, so ZooKeeper would log
	// nothing. slf4j-simple (a dependency of the package) writes the log
	// to stderr, which ends up in the member's log.
	if simple := filepath.Join(dir, "slf4j-simple.jar"); fileExists(simple) {
		jars = append(jars, simple)
	}
	// The AdminServer (Options.AdminServer) runs on Jetty, which the
	// jar's manifest names, and needs the servlet API, which it does not
	// (Debian's libservlet-api-java).
	if servlet := filepath.Join(dir, "servlet-api.jar"); fileExists(servlet) {
		jars = append(jars, servlet)
	}
	// Unused jars cost nothing: only a TLS cluster loads Netty's classes.
	// Without the epoll ones Netty falls back to NIO.
	netty = true
	for _, name := range debianNettyJars {
		if j := filepath.Join(dir, name); fileExists(j) {
			jars = append(jars, j)
		} else if !strings.Contains(name, "-native-") {
			netty = false
		}
	}
	return strings.Join(jars, string(os.PathListSeparator)), netty, nil
}

// homeClasspath lists the jars of an unpacked release: lib/*.jar and *.jar,
// plus conf/ so that its logging configuration is found.
func homeClasspath(home string) (string, bool, error) {
	lib, _ := filepath.Glob(filepath.Join(home, "lib", "*.jar"))
	top, _ := filepath.Glob(filepath.Join(home, "*.jar"))
	jars := append(lib, top...)
	found, netty := false, false
	for _, j := range jars {
		base := filepath.Base(j)
		if strings.HasPrefix(base, "zookeeper-") {
			found = true
		}
		if strings.HasPrefix(base, "netty-codec-") || strings.HasPrefix(base, "netty-all-") {
			netty = true
		}
	}
	if !found {
		return "", false, &unavailableError{fmt.Sprintf("ZOOKEEPER_HOME=%s holds no zookeeper-*.jar in lib/ or at the top; %s", home, installHint)}
	}
	if conf := filepath.Join(home, "conf"); fileExists(conf) {
		jars = append(jars, conf)
	}
	return strings.Join(jars, string(os.PathListSeparator)), netty, nil
}

func fileExists(name string) bool {
	_, err := os.Stat(name)
	return err == nil
}

// isUnavailable reports whether err says that Java or ZooKeeper, or what
// Unavailable marked, is missing.
func isUnavailable(err error) bool {
	var u *unavailableError
	var m *missingError
	return errors.As(err, &u) || errors.As(err, &m)
}
