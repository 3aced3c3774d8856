package sel

import (
	"context"
	"fmt"
	"sync"
	"testing"
)

// safetyCases are attempts to reach outside the language. Each must fail as
// an ordinary error.
var safetyCases = []evalCase{
	{src: `System.exit(0)`, errKind: KindType, errHas: "unknown method System.exit"},
	{src: `System.getenv("HOME")`, errKind: KindType},
	{src: `System.getProperty("user.dir")`, errKind: KindType},
	{src: `Runtime.getRuntime().exec("ls")`, errKind: KindRuntime, errHas: "NullPointerException"},
	{src: `Class.forName("java.lang.Runtime")`, errKind: KindRuntime},
	{src: `new java.io.File("/etc/passwd")`, errKind: KindType, errHas: "cannot create"},
	{src: `new ProcessBuilder("ls")`, errKind: KindType},
	{src: `Thread.sleep(100000)`, errKind: KindRuntime},
	{src: `"x".getClass().getClassLoader()`, errKind: KindType},
	{src: `Math.class`, errKind: KindSyntax},
	{src: `this.toString()`, errKind: KindSyntax},
	{src: `new URL("http://example.com").openStream()`, errKind: KindType},
	{src: `DateTimeZone.forID("/etc/passwd")`, errKind: KindRuntime},
	{src: `String.class.getMethods()`, errKind: KindSyntax},
}

func TestSafety(t *testing.T) { t.Parallel(); run(t, safetyCases) }

// TestConcurrentEval evaluates one Program from many goroutines; run it with
// -race.
func TestConcurrentEval(t *testing.T) {
	t.Parallel()
	p, err := Compile(`
		long total = 0;
		for (long d : Util.dateIntsBetween(start, 20200201, 1)) { total += d % 100; }
		Map m = new HashMap();
		m.put("k", String.format("%s-%d", name, total));
		String[] parts = m.get("k").split("-");
		return parts[0] + ":" + parts[1] + ":" + "a.b".replaceAll("\\.", "");`)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := 0; g < 32; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 20; i++ {
				name := fmt.Sprintf("w%d", g)
				v, err := p.Eval(context.Background(), MapEnv{"start": 20200101, "name": name})
				if err != nil {
					errs <- err
					return
				}
				if want := name + ":496:ab"; v != want {
					errs <- fmt.Errorf("got %v want %v", v, want)
					return
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}
