package kerberos

import (
	"crypto/rand"
	"strings"
	"testing"

	"github.com/jcmturner/gofork/encoding/asn1"
	"github.com/jcmturner/gokrb5/v8/asn1tools"
	"github.com/jcmturner/gokrb5/v8/crypto"
	"github.com/jcmturner/gokrb5/v8/gssapi"
	"github.com/jcmturner/gokrb5/v8/iana/etypeID"
	"github.com/jcmturner/gokrb5/v8/iana/keyusage"
	"github.com/jcmturner/gokrb5/v8/messages"
	"github.com/jcmturner/gokrb5/v8/types"
)

func newKey(t *testing.T) types.EncryptionKey {
	k := types.EncryptionKey{KeyType: etypeID.AES256_CTS_HMAC_SHA1_96, KeyValue: make([]byte, 32)}
	rand.Read(k.KeyValue)
	return k
}

// apRep makes the GSS token of an AP-REP answering auth, encrypted with
// key.
func apRep(t *testing.T, key types.EncryptionKey, enc messages.EncAPRepPart) []byte {
	t.Helper()
	b, err := asn1.Marshal(enc)
	if err != nil {
		t.Fatal(err)
	}
	ed, err := crypto.GetEncryptedData(asn1tools.AddASNAppTag(b, 27), key, keyusage.AP_REP_ENCPART, 0)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := asn1.Marshal(messages.APRep{PVNO: 5, MsgType: 15, EncPart: ed})
	if err != nil {
		t.Fatal(err)
	}
	oid, _ := asn1.Marshal(asn1.ObjectIdentifier(krb5OID))
	return asn1tools.AddASNAppTag(append(append(oid, 0x02, 0x00), asn1tools.AddASNAppTag(rep, 15)...), 0)
}

// TestMutualAuthentication: the client accepts the server only if its
// AP-REP decrypts with the session key and echoes the authenticator, and
// its wrap tokens only with a right checksum under the right key.
func TestMutualAuthentication(t *testing.T) {
	key := newKey(t)
	auth, err := types.NewAuthenticator("R", types.PrincipalName{NameType: 1, NameString: []string{"bob"}})
	if err != nil {
		t.Fatal(err)
	}
	fresh := func() *exchange { return &exchange{spn: "zookeeper/h", key: key, auth: auth} }
	echo := messages.EncAPRepPart{CTime: auth.CTime, Cusec: auth.Cusec}

	if err := fresh().checkAPRep(apRep(t, key, echo)); err != nil {
		t.Fatalf("a right AP-REP: %v", err)
	}
	if err := fresh().checkAPRep(apRep(t, newKey(t), echo)); err == nil || !strings.Contains(err.Error(), "does not decrypt") {
		t.Errorf("an AP-REP under another key: %v", err)
	}
	late := echo
	late.Cusec = (late.Cusec + 1) % 1000000
	if err := fresh().checkAPRep(apRep(t, key, late)); err == nil || !strings.Contains(err.Error(), "does not answer") {
		t.Errorf("an AP-REP with another time: %v", err)
	}

	// Wrap tokens: the server's offer under the acceptor's subkey.
	sub := newKey(t)
	withSub := echo
	withSub.Subkey = sub
	withSub.SequenceNumber = 42
	x := fresh()
	if err := x.checkAPRep(apRep(t, key, withSub)); err != nil || x.subkey == nil {
		t.Fatalf("an AP-REP with a subkey: %v", err)
	}
	offer := func(k types.EncryptionKey, payload []byte) []byte {
		wt := gssapi.WrapToken{Flags: sentByAcceptor | acceptorSubkey, EC: 12, SndSeqNum: 42, Payload: payload}
		if err := wt.SetCheckSum(k, keyusage.GSSAPI_ACCEPTOR_SEAL); err != nil {
			t.Fatal(err)
		}
		b, _ := wt.Marshal()
		return b
	}
	if p, err := x.unwrap(offer(sub, []byte{1, 0, 0, 0})); err != nil || string(p) != "\x01\x00\x00\x00" {
		t.Fatalf("a right offer: %q %v", p, err)
	}
	if _, err := x.unwrap(offer(key, []byte{1, 0, 0, 0})); err == nil {
		t.Error("an offer under the session key instead of the subkey is accepted")
	}
	tampered := offer(sub, []byte{1, 0, 0, 0})
	tampered[16] = 7
	if _, err := x.unwrap(tampered); err == nil {
		t.Error("a tampered offer is accepted")
	}
	x.serverSeq = 41
	if _, err := x.unwrap(offer(sub, []byte{1, 0, 0, 0})); err == nil || !strings.Contains(err.Error(), "sequence number") {
		t.Errorf("an offer with another sequence number: %v", err)
	}
	x.serverSeq = 42
	// Rotated (RRC) tokens are undone before checking.
	b := offer(sub, []byte{1, 0, 0, 0})
	data := append([]byte(nil), b[16:]...)
	rrc := 5
	rotated := append(append(append([]byte(nil), b[:16]...), data[len(data)-rrc:]...), data[:len(data)-rrc]...)
	rotated[7] = byte(rrc)
	if _, err := x.unwrap(rotated); err != nil {
		t.Errorf("a rotated offer: %v", err)
	}
	// Our answer is under the subkey too, flagged so.
	ans, err := x.wrap([]byte{1, 0, 0, 0})
	if err != nil {
		t.Fatal(err)
	}
	var wt gssapi.WrapToken
	if err := wt.Unmarshal(ans, false); err != nil || wt.Flags != acceptorSubkey || wt.SndSeqNum != uint64(auth.SeqNumber) {
		t.Fatalf("answer: %+v %v", wt, err)
	}
	if ok, err := wt.Verify(sub, keyusage.GSSAPI_INITIATOR_SEAL); !ok {
		t.Errorf("answer's checksum: %v", err)
	}
}
