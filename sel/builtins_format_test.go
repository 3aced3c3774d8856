package sel

import (
	"math"
	"testing"
)

var formatCases = []evalCase{
	{src: `String.format("%s", "x")`, want: "x"},
	{src: `String.format("%d", 5)`, want: "5"},
	{src: `String.format("%02d", 7)`, want: "07"},
	{src: `String.format("%05d", -42)`, want: "-0042"},
	{src: `String.format("%.2f", 3.14159)`, want: "3.14"},
	{name: "HALF_UP on the decimal string like Java", src: `String.format("%.2f", 2.675)`, want: "2.68"},
	{src: `String.format("%.2f", 0.125)`, want: "0.13"},
	{src: `String.format("%.2f", 1.005)`, want: "1.01"},
	{src: `String.format("%.1f", 0.05)`, want: "0.1"},
	{src: `String.format("%.1f", 0.35)`, want: "0.4"},
	{src: `String.format("%.0f", 2.5)`, want: "3"},
	{src: `String.format("%.0f", 0.5)`, want: "1"},
	{src: `String.format("%.2f", 9.995)`, want: "10.00"},
	{src: `String.format("%.2f", 1e-10)`, want: "0.00"},
	{src: `String.format("%.2f", -0.001)`, want: "-0.00"},
	{src: `String.format("%f", 1.5)`, want: "1.500000"},
	{src: `String.format("%.20f", 0.1)`, want: "0.10000000000000000000"},
	{src: `String.format("%.2f", 1e20)`, want: "100000000000000000000.00"},
	{src: `String.format("%.2f", 1234567.891)`, want: "1234567.89"},
	{src: `String.format("%,.2f", 1234567.891)`, want: "1,234,567.89"},
	{src: `String.format("%10.4f", Math.PI)`, want: "    3.1416"},
	{src: `String.format("%08.3f", -3.14159)`, want: "-003.142"},
	{src: `String.format("%5s|%-5s|", "ab", "cd")`, want: "   ab|cd   |"},
	{src: `String.format("%-10d|", 42)`, want: "42        |"},
	{src: `String.format("%,d", 1234567)`, want: "1,234,567"},
	{src: `String.format("%,d", -1234)`, want: "-1,234"},
	{src: `String.format("%+d % d %(d", 5, 5, -5)`, want: "+5  5 (5)"},
	{src: `String.format("%x %X %o", 255, 255, 8)`, want: "ff FF 10"},
	{src: `String.format("%x", -1)`, want: "ffffffff"},
	{src: `String.format("%x", 4294967296)`, want: "100000000"},
	{src: `String.format("%#x", 255)`, want: "0xff"},
	{src: `String.format("%e", 12345.678)`, want: "1.234568e+04"},
	{src: `String.format("%.3e", 0.0)`, want: "0.000e+00"},
	{src: `String.format("%E", 0.000123)`, want: "1.230000E-04"},
	{src: `String.format("%g", 123.456)`, want: "123.456"},
	{src: `String.format("%g", 0.0001)`, want: "0.000100000"},
	{src: `String.format("%g", 1e10)`, want: "1.00000e+10"},
	{src: `String.format("%b %b %b", true, null, "x")`, want: "true false true"},
	{src: `String.format("%c%c", 65, 0x1F600)`, want: "A😀"},
	{src: `String.format("100%% done%n")`, want: "100% done\n"},
	{src: `String.format("%2$s-%1$s", "a", "b")`, want: "b-a"},
	{src: `String.format("%s %<s", "x")`, want: "x x"},
	{src: `String.format("%s", 1.0)`, want: "1.0"},
	{src: `String.format("%s", 1e10)`, want: "1.0E10"},
	{src: `String.format("%s", null)`, want: "null"},
	{src: `String.format("%s", new long[]{1, 2})`, want: "[1, 2]"},
	{src: `String.format("%.3s|%S", "abcdef", "abc")`, want: "abc|ABC"},
	{name: "a String[] is spread as varargs", src: `String.format("%s-%s", new String[]{"a", "b"})`, want: "a-b"},
	{src: `String.format("%s_%s", "2024", 7)`, want: "2024_7"},
	{src: `String.format("%f", 1.0 / 0)`, want: "Infinity"},
	{src: `String.format("%d", 1.5)`, errKind: KindRuntime, errHas: "IllegalFormatConversionException: d != java.lang.Double"},
	{src: `String.format("%f", 1)`, errKind: KindRuntime, errHas: "f != java.lang.Integer"},
	{src: `String.format("%s %s", "a")`, errKind: KindRuntime, errHas: "MissingFormatArgumentException"},
	{src: `String.format("%q", 1)`, errKind: KindRuntime, errHas: "UnknownFormatConversionException"},
	{src: `String.format("%-d", 1)`, errKind: KindRuntime, errHas: "MissingFormatWidth"},
	{src: `String.format("abc%")`, errKind: KindRuntime},
	{src: `String.format("%tY", 1)`, errKind: KindRuntime, errHas: "not supported"},
	{src: `String.format(5)`, errKind: KindType},
}

func TestFormat(t *testing.T) { t.Parallel(); run(t, formatCases) }

func TestJavaDouble(t *testing.T) {
	t.Parallel()
	cases := []struct {
		f    float64
		want string
	}{
		{0, "0.0"}, {math.Copysign(0, -1), "-0.0"}, {1, "1.0"}, {-1, "-1.0"}, {0.1, "0.1"},
		{100, "100.0"}, {1e7, "1.0E7"}, {9999999, "9999999.0"}, {1e-3, "0.001"}, {1e-4, "1.0E-4"},
		{1e10, "1.0E10"}, {1e-5, "1.0E-5"}, {123.456, "123.456"}, {2e-3, "0.002"},
		{math.MaxFloat64, "1.7976931348623157E308"}, {math.SmallestNonzeroFloat64, "4.9E-324"},
		{1.0 / 3, "0.3333333333333333"}, {1e23, "1.0E23"}, {2e23, "2.0E23"}, {5e-324 * 3, "1.5E-323"},
		{math.Inf(1), "Infinity"}, {math.Inf(-1), "-Infinity"}, {math.NaN(), "NaN"},
		{12345678.9, "1.23456789E7"}, {0.5, "0.5"}, {1234567.125, "1234567.125"},
	}
	for _, c := range cases {
		if got := javaDouble(c.f); got != c.want {
			t.Errorf("javaDouble(%v) = %q, want %q", c.f, got, c.want)
		}
	}
}
