package protocol

import (
	"encoding/json"
	"math"
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

// FuzzAppendRequestJSON holds every request appender to json.Marshal, byte for byte
// and error for error.
func FuzzAppendRequestJSON(f *testing.F) {
	for _, s := range []string{"", "plain", `q"b\`, "\x00\x1f\n\t", "<a&b>", "\u2028", "\xff\xfe", "é☃"} {
		f.Add(s, []byte(s), int64(len(s)), float64(len(s)))
	}
	f.Add("nil", []byte(nil), int64(-1), 0.5)
	f.Add("ttl", []byte("v"), int64(0), 1e21)
	f.Add("ttl", []byte("v"), int64(3), 1e-7)
	f.Add("ttl", []byte("v"), int64(4), math.Inf(1))
	f.Add("ttl", []byte("v"), int64(5), math.NaN())
	f.Add("ttl", []byte("v"), int64(6), -123.456)
	f.Fuzz(func(t *testing.T, s string, b []byte, n int64, ttl float64) {
		if len(b) == 0 && n%2 == 0 {
			b = nil
		}
		var ctx Ctx
		switch n % 4 {
		case 1:
			ctx.Context = &RequestContext{TimeoutMS: n}
		case 2:
			ctx.Context = &RequestContext{TraceID: s, TimeoutMS: n}
		case 3:
			ctx.Context = &RequestContext{TraceID: s}
		case -1, -2, -3:
			ctx.Context = &RequestContext{}
		}
		for _, v := range []interface {
			AppendJSON([]byte) ([]byte, error)
		}{
			KVKeyRequest{Ctx: ctx, Key: s}, KVSetRequest{Ctx: ctx, Key: s, Value: b, TTLSeconds: ttl},
			KVSetRequest{Ctx: ctx, Key: s, Value: b}, KVValueRequest{Ctx: ctx, Key: s + "k", Value: b},
			ObjectRequest{Ctx: ctx, Prefix: s, Key: "k"}, PutObjectRequest{Ctx: ctx, Prefix: "p", Key: s, Content: b},
			ListObjectsRequest{Ctx: ctx, Prefix: s},
		} {
			want, wantErr := json.Marshal(v)
			got, err := v.AppendJSON([]byte("prefix"))
			if (err != nil) != (wantErr != nil) {
				t.Fatalf("%T %+v: appender error %v, encoding/json's %v", v, v, err, wantErr)
			}
			if err == nil && string(got) != "prefix"+string(want) {
				t.Fatalf("%T %+v: appended %s, encoding/json writes %s", v, v, got[len("prefix"):], want)
			}
		}
	})
}
