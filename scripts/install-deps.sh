#!/usr/bin/env bash
# Installs, from Debian's packages, what the tests need and the machine lacks:
# Apache ZooKeeper 3.8 (real server for the tests), Curator's recipes and
# service discovery (Java interop tests), kazoo (Python interop tests), a JDK
# (javac), MIT Kerberos (a KDC for the Kerberos tests) and PostgreSQL (the
# fencing adapters' tests), Chromium (zkr console's browser tests).
set -euo pipefail

need=()
[ -f /usr/share/java/zookeeper.jar ] || need+=(zookeeper)
# Netty, for zktest's Options.TLS; zookeeper pulls it in, but its jar's
# manifest does not name netty-codec.
[ -f /usr/share/java/netty-codec.jar ] || need+=(libnetty-java)
[ -f /usr/share/java/servlet-api.jar ] || need+=(libservlet-api-java)
[ -f /usr/share/java/curator-recipes.jar ] || need+=(libcurator-recipes-java)
[ -f /usr/share/java/curator-x-discovery.jar ] || need+=(libcurator-discovery-java)
[ -f /usr/share/java/slf4j-nop.jar ] || need+=(libslf4j-java)
/usr/bin/python3 -c 'import kazoo' 2>/dev/null || need+=(python3-kazoo)
command -v javac >/dev/null 2>&1 || need+=(default-jdk-headless)
# MIT Kerberos, for zktest's KDC (the SASL GSSAPI tests): krb5kdc and
# kdb5_util (krb5-kdc, which pulls in kinit), kadmin.local
# (krb5-admin-server). They live in /usr/sbin.
[ -x /usr/sbin/krb5kdc ] || need+=(krb5-kdc)
[ -x /usr/sbin/kadmin.local ] || need+=(krb5-admin-server)
# PostgreSQL, for fencing/sqltest: its tests run initdb and postgres
# themselves, from /usr/lib/postgresql/<major>/bin, as the postgres user.
compgen -G '/usr/lib/postgresql/*/bin/postgres' >/dev/null || need+=(postgresql)
# curl, for cmd/zkr's TestLockTokenThroughGuard: the shell pattern of
# docs/fencing.md, a zkr lock command sending its token with curl.
command -v curl >/dev/null 2>&1 || need+=(curl)
# Chromium, headless, for zkr console's browser tests (cmd/zkr, driven with
# chromedp, which never downloads a browser of its own).
[ -x /usr/bin/chromium ] || need+=(chromium)

if [ ${#need[@]} -eq 0 ]; then
	echo "install-deps: everything is installed"
	exit 0
fi
echo "install-deps: installing ${need[*]}"
if [ "$(id -u)" -ne 0 ]; then
	echo "install-deps: need root to apt-get install ${need[*]} (run: sudo $0)" >&2
	exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends "${need[@]}"
