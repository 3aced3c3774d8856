package workflow

import (
	"strings"
	"testing"
)

// MergeTags keeps the base tags in order, replaces a tag of the same name
// and appends the new ones, as Maestro's TagList.merge.
func TestMergeTags(t *testing.T) {
	t.Parallel()
	base := Tags{NewTag("a"), {Name: "b", Namespace: "PLATFORM"}}
	got := MergeTags(base, Tags{{Name: "b", Namespace: "RUNTIME"}, NewTag("c")})
	if strings.Join(got.Names(), ",") != "a,b,c" || got[1].Namespace != "RUNTIME" {
		t.Fatalf("merged %+v", got)
	}
	if len(base) != 2 || base[1].Namespace != "PLATFORM" {
		t.Fatalf("the base changed: %+v", base)
	}
	if err := CheckTags(Tags{NewTag("x"), NewTag("x")}, "runtime_tags"); err == nil || !strings.Contains(err.Error(), "runtime_tags[1].name") {
		t.Fatalf("duplicate runtime tags: %v", err)
	}
}
