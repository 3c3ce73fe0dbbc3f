package zkserver

import (
	"crypto/x509/pkix"
	"encoding/asn1"
	"testing"

	"github.com/zkrecipes/zkrecipes/internal/jute"
)

// The expected strings below are what Java 17's
// X500Principal(der).getName() returned for the same DER names, and
// whether new X500Principal(s) accepted each string.

func TestX509Name(t *testing.T) {
	oid := func(v ...int) asn1.ObjectIdentifier { return v }
	raw := func(tag int, b ...byte) asn1.RawValue {
		return asn1.RawValue{Class: asn1.ClassUniversal, Tag: tag, Bytes: b}
	}
	for _, tc := range []struct {
		name pkix.RDNSequence
		want string
	}{
		{pkix.Name{CommonName: "zktest-client"}.ToRDNSequence(), "CN=zktest-client"},
		{pkix.Name{CommonName: `a,b+c=d#e;f"g\h<i>j`, Organization: []string{"Ex Co"}, Country: []string{"US"}}.ToRDNSequence(),
			`CN=a\,b\+c\=d\#e\;f\"g\\h\<i\>j,O=Ex Co,C=US`},
		{pkix.Name{CommonName: " lead and trail ", OrganizationalUnit: []string{"u1", "u2"}}.ToRDNSequence(),
			`CN=\ lead and trail\ ,OU=u1+OU=u2`},
		{pkix.Name{CommonName: "#start", Province: []string{"Bavaria"}, Locality: []string{"München"}}.ToRDNSequence(),
			`CN=\#start,L=München,ST=Bavaria`},
		{pkix.Name{CommonName: "日本 é", StreetAddress: []string{"1 Main St"}, PostalCode: []string{"12345"}, SerialNumber: "42"}.ToRDNSequence(),
			`2.5.4.5=#13023432,CN=日本 é,2.5.4.17=#13053132333435,STREET=1 Main St`},
		{pkix.Name{CommonName: "   "}.ToRDNSequence(), `CN=\ \ \ `},
		{pkix.Name{CommonName: "nul\x00x"}.ToRDNSequence(), `CN=nul\00x`},
		{pkix.Name{ExtraNames: []pkix.AttributeTypeAndValue{
			{Type: oid(0, 9, 2342, 19200300, 100, 1, 25), Value: "example"},
			{Type: oid(0, 9, 2342, 19200300, 100, 1, 1), Value: "jdoe"},
			{Type: oid(1, 2, 840, 113549, 1, 9, 1), Value: "a@b.c"},
			{Type: oid(1, 2, 3, 4), Value: "other"},
			{Type: oid(2, 5, 4, 3), Value: "x@y_z"},
		}}.ToRDNSequence(), `CN=x@y_z,1.2.3.4=#13056f74686572,1.2.840.113549.1.9.1=#0c056140622e63,UID=jdoe,DC=example`},
		{pkix.RDNSequence{
			{{Type: oid(2, 5, 4, 3), Value: "m"}, {Type: oid(2, 5, 4, 11), Value: "n"}},
			{{Type: oid(2, 5, 4, 10), Value: "o"}},
		}, `O=o,CN=m+OU=n`},
		{pkix.RDNSequence{ // BMPString, T61String: Java reads their bytes as UTF-8; UniversalString as hex
			{{Type: oid(2, 5, 4, 3), Value: raw(asn1.TagBMPString, 0, 'h', 0, 'i', 0, 0xe9)}},
			{{Type: oid(2, 5, 4, 10), Value: raw(asn1.TagT61String, 't', 0xe9)}},
			{{Type: oid(2, 5, 4, 11), Value: raw(28, 0, 0, 0, 'u')}},
		}, "OU=#1c0400000075,O=t\uFFFD,CN=\\00h\\00i\\00\uFFFD"},
	} {
		der, err := asn1.Marshal(tc.name)
		if err != nil {
			t.Fatal(err)
		}
		got, err := x509Name(der)
		if err != nil || got != tc.want {
			t.Errorf("x509Name(%v) = %q, %v; want %q", tc.name, got, err, tc.want)
		}
	}
}

func TestValidX509ID(t *testing.T) {
	for id, want := range map[string]bool{
		"CN=a": true, "not a dn": false, "cn=x": true, "": true, "CN=a,O=b": true, "CN=a+OU=b": true,
		"CN=": true, "=x": false, "CN=a;O=b": true, "1.2.3=#0101": false, "FOO=x": false,
		`CN="quoted"`: true, `CN=a\`: false, "1.2.3=#0c0161": true, "1.2.3=#01": false,
		"OID.1.2.3=x": true, "1.2.3=x": true, "EMAILADDRESS=a@b": true, "email=a@b": true,
		"SERIALNUMBER=1": true, "T=x": true, "DNQ=x": true, "UID=x": true, "DC=x": true,
		"STREET=x": true, "GIVENNAME=x": true, "SURNAME=x": true, "CN=a, O=b": true,
		"CN = a": true, " CN=a": true, "CN=a ": true, "CN=a,,": false, "CN=a,": false,
		"CN=#zz": false, "CN=#0c0161": true, `CN=a\,b`: true, `CN=a\2cb`: true, `CN=a\zz`: false,
		`CN="a,b"`: true, `CN="a`: false, "cn=a+": false, "ZZ=1": false, "IP=1.2.3.4": true,
		"S=x": true, "ST=x": true, "GENERATION=x": true, "INITIALS=x": true, "DNQUALIFIER=x": true,
	} {
		if got := validX509ID(id); got != want {
			t.Errorf("validX509ID(%q) = %v, want %v", id, got, want)
		}
	}
}

// TestJavaSetOrder checks the order ZooKeeper 3.8 listed identities in
// (whoAmI), seen in the conformance transcripts.
func TestJavaSetOrder(t *testing.T) {
	id := func(scheme, v string) jute.ID { return jute.ID{Scheme: scheme, ID: v} }
	for _, tc := range []struct{ added, want []jute.ID }{
		{
			[]jute.ID{id("ip", "127.0.0.1"), id("digest", DigestID("alice", "secret"))},
			[]jute.ID{id("digest", DigestID("alice", "secret")), id("ip", "127.0.0.1")},
		},
		{
			[]jute.ID{id("x509", "CN=zktest-client"), id("ip", "127.0.0.1"), id("digest", DigestID("u", "p"))},
			[]jute.ID{id("x509", "CN=zktest-client"), id("ip", "127.0.0.1"), id("digest", DigestID("u", "p"))},
		},
	} {
		got := javaSetOrder(tc.added)
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("javaSetOrder(%v) = %v, want %v", tc.added, got, tc.want)
				break
			}
		}
	}
}
