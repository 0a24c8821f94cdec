package protocol

import (
	"encoding/json"
	"testing"
)

// FuzzAppendJSON holds every reply appender to json.Marshal, byte for byte. The seeds
// (run in every go test) cover the escapes encoding/json makes: quotes, backslashes,
// control characters, HTML characters, U+2028, invalid UTF-8, nil and empty bytes.
func FuzzAppendJSON(f *testing.F) {
	for _, s := range []string{"", "plain", `q"b\`, "\x00\x1f\n\t", "<a&b>", "\u2028\u2029", "\xff\xfe", "é☃", "\x7f"} {
		f.Add(s, []byte(s), true, int64(len(s)))
	}
	f.Add("nil", []byte(nil), false, int64(-1))
	f.Fuzz(func(t *testing.T, s string, b []byte, flag bool, n int64) {
		if len(b) == 0 && n%2 == 0 {
			b = nil // both nil and empty bytes
		}
		var keys []string
		if n%3 != 0 {
			keys = []string{s, "k", s + "x"}[:int(uint64(n)%4)%4]
		}
		for _, v := range []interface{ AppendJSON([]byte) []byte }{
			KVGetReply{Found: flag, Value: b}, KVSetReply{Set: flag}, KVDeleteReply{Deleted: flag},
			KVExistsReply{Exists: flag}, Empty{}, GetObjectReply{Content: b}, ListObjectsReply{Keys: keys},
			ObjectMetadataReply{Size: n, ModifiedAt: s}, Envelope{Error: &Error{Code: Code(s), Message: s + "!", Retryable: flag}},
			Envelope{},
		} {
			want, err := json.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			if got := v.AppendJSON([]byte("prefix")); string(got) != "prefix"+string(want) {
				t.Fatalf("%T %+v: appended %s, encoding/json writes %s", v, v, got[len("prefix"):], want)
			}
		}
	})
}
