package zkserver

import (
	"encoding/asn1"
	"encoding/hex"
	"strings"
)

// The x509 scheme: a TLS client that presents a certificate the server
// verified is authenticated as x509:<subject>, the subject written as
// Java's X500Principal.getName() writes it (RFC 2253), which is what
// ZooKeeper's X509AuthenticationProvider uses: "CN=client,O=Example".

// rdnSET and rawATV decode a certificate's subject keeping each value's
// original encoding (the SET suffix makes encoding/asn1 read a SET OF).
type (
	rdnSET []rawATV
	rawATV struct {
		Type  asn1.ObjectIdentifier
		Value asn1.RawValue
	}
)

// rfc2253Keywords are the attribute types X500Principal.getName() names;
// others appear as dotted OIDs with a hex value.
var rfc2253Keywords = map[string]string{
	"2.5.4.3":                    "CN",
	"2.5.4.6":                    "C",
	"2.5.4.7":                    "L",
	"2.5.4.8":                    "ST",
	"2.5.4.10":                   "O",
	"2.5.4.11":                   "OU",
	"2.5.4.9":                    "STREET",
	"0.9.2342.19200300.100.1.25": "DC",
	"0.9.2342.19200300.100.1.1":  "UID",
}

// x509Name formats a DER-encoded distinguished name (a certificate's
// RawSubject) as X500Principal.getName() does: the RDNs last first,
// separated by commas, multi-valued RDNs joined by '+'.
func x509Name(der []byte) (string, error) {
	var seq []rdnSET
	rest, err := asn1.Unmarshal(der, &seq)
	if err != nil {
		return "", err
	}
	if len(rest) > 0 {
		return "", asn1.SyntaxError{Msg: "trailing data after the name"}
	}
	rdns := make([]string, 0, len(seq))
	for i := len(seq) - 1; i >= 0; i-- {
		avas := make([]string, len(seq[i]))
		for j, a := range seq[i] {
			avas[j] = formatATV(a)
		}
		rdns = append(rdns, strings.Join(avas, "+"))
	}
	return strings.Join(rdns, ","), nil
}

func formatATV(a rawATV) string {
	oid := a.Type.String()
	key, known := rfc2253Keywords[oid]
	if !known {
		key = oid
	}
	val, isString := derString(a.Value)
	if !known || !isString {
		return key + "=#" + hex.EncodeToString(a.Value.FullBytes)
	}
	return key + "=" + escapeRFC2253(val)
}

// derString returns the text of a value of one of the string types
// Java's AVA writes as text; it reads their bytes as UTF-8, whatever the
// type (a BMPString's NUL bytes then show as \00).
func derString(v asn1.RawValue) (string, bool) {
	if v.Class != asn1.ClassUniversal {
		return "", false
	}
	switch v.Tag {
	case asn1.TagPrintableString, asn1.TagT61String, asn1.TagIA5String, asn1.TagUTF8String,
		asn1.TagBMPString, 27: // 27: GeneralString
		return string(v.Bytes), true
	}
	return "", false
}

// escapeRFC2253 escapes a value as Java's AVA.toRFC2253String does: a
// backslash before each of ,=+<>#;"\, NUL as \00, and a backslash before
// leading and trailing spaces.
func escapeRFC2253(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case strings.ContainsRune(`,=+<>#;"\`, r):
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == 0:
			b.WriteString(`\00`)
		default:
			b.WriteRune(r)
		}
	}
	out := b.String()
	lead := len(out) - len(strings.TrimLeft(out, " \r"))
	trail := len(out) - len(strings.TrimRight(out, " \r"))
	if lead == len(out) {
		trail = 0
	}
	var e strings.Builder
	for i := 0; i < len(out); i++ {
		if i < lead || i >= len(out)-trail {
			e.WriteByte('\\')
		}
		e.WriteByte(out[i])
	}
	return e.String()
}

// validX509ID reports whether id is a distinguished name Java's
// X500Principal accepts, as ZooKeeper's X509AuthenticationProvider
// requires of an x509 ACL id: RDNs separated by ',' or ';', attribute
// value assertions joined by '+', each a keyword ZooKeeper's JVM knows or
// an OID, '=', and a value: quoted, '#' and the hex of a DER value, or a
// string whose special characters are escaped.
func validX509ID(id string) bool {
	p := dnParser{s: id}
	p.space()
	if p.done() {
		return true
	}
	for {
		if !p.ava() {
			return false
		}
		p.space()
		if p.done() {
			return true
		}
		switch p.s[p.i] {
		case ',', ';', '+':
			p.i++
			p.space()
			if p.done() {
				return false // a separator must be followed by an AVA
			}
		default:
			return false
		}
	}
}

var dnKeywords = map[string]bool{
	"CN": true, "C": true, "L": true, "S": true, "ST": true, "O": true, "OU": true, "T": true,
	"IP": true, "STREET": true, "DC": true, "DNQUALIFIER": true, "DNQ": true, "SURNAME": true,
	"GIVENNAME": true, "INITIALS": true, "GENERATION": true, "EMAIL": true, "EMAILADDRESS": true,
	"UID": true, "SERIALNUMBER": true,
}

type dnParser struct {
	s string
	i int
}

func (p *dnParser) done() bool { return p.i >= len(p.s) }

func (p *dnParser) space() {
	for !p.done() && p.s[p.i] == ' ' {
		p.i++
	}
}

func (p *dnParser) ava() bool {
	start := p.i
	for !p.done() && p.s[p.i] != '=' && p.s[p.i] != ',' && p.s[p.i] != ';' && p.s[p.i] != '+' {
		p.i++
	}
	if p.done() || p.s[p.i] != '=' {
		return false
	}
	key := strings.TrimSpace(p.s[start:p.i])
	p.i++
	if !validKeyword(key) {
		return false
	}
	p.space()
	if p.done() {
		return true // an empty value
	}
	switch p.s[p.i] {
	case '"':
		p.i++
		for !p.done() && p.s[p.i] != '"' {
			if p.s[p.i] == '\\' {
				p.i++
			}
			p.i++
		}
		if p.done() {
			return false
		}
		p.i++
		return true
	case '#':
		p.i++
		start := p.i
		for !p.done() && isHex(p.s[p.i]) {
			p.i++
		}
		b, err := hex.DecodeString(p.s[start:p.i])
		if err != nil || len(b) == 0 {
			return false
		}
		var v asn1.RawValue
		rest, err := asn1.Unmarshal(b, &v)
		return err == nil && len(rest) == 0
	}
	for !p.done() {
		switch c := p.s[p.i]; c {
		case ',', ';', '+':
			return true
		case '\\':
			if p.i+1 >= len(p.s) {
				return false
			}
			n := p.s[p.i+1]
			switch {
			case strings.IndexByte(",=+<>#;\"\\ ", n) >= 0:
				p.i += 2
			case p.i+2 < len(p.s) && isHex(n) && isHex(p.s[p.i+2]):
				p.i += 3
			default:
				return false
			}
		case '"':
			return false
		default:
			p.i++
		}
	}
	return true
}

func validKeyword(k string) bool {
	if dnKeywords[strings.ToUpper(k)] {
		return true
	}
	if len(k) > 4 && strings.EqualFold(k[:4], "OID.") {
		k = k[4:]
	}
	parts := strings.Split(k, ".")
	if len(parts) < 2 {
		return false
	}
	for _, part := range parts {
		if part == "" {
			return false
		}
		for i := 0; i < len(part); i++ {
			if part[i] < '0' || part[i] > '9' {
				return false
			}
		}
	}
	return true
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}
