package demangle

import "strings"

// Parser states of perf's demangle-java.c.
const (
	javaPrefix    = iota // before the class
	javaClass            // in the class name
	javaFunc             // in the method name
	javaType             // in the argument list
	javaClassType        // in a class-typed argument
)

var javaBaseTypes = [...]string{
	'B' - 'A': "byte",
	'C' - 'A': "char",
	'D' - 'A': "double",
	'F' - 'A': "float",
	'I' - 'A': "int",
	'J' - 'A': "long",
	'S' - 'A': "short",
	'Z' - 'A': "boolean",
}

// demangleJava follows perf's java_demangle_sym with JAVA_DEMANGLE_NORET,
// including its quirks, since the goal is to print what perf prints:
// an array dimension on a class-typed argument is carried over to the next
// primitive argument, no "." separates the class from a method whose name
// does not start with a letter (<init>), and the result is cut at three
// times the input length. Whatever perf rejects is rejected here. perf
// also takes names with something before the L, copied as it is
// ("xyzLa;b()V" is "xyza.b()"); no runtime writes such names, and
// looking only at names that start with L keeps the others to a byte
// test.
func demangleJava(sym string) (string, bool) {
	end := strings.LastIndexByte(sym, ')')
	if end < 0 {
		return "", false
	}
	end++ // the return type after ')' is left out
	b := javaBuf{b: make([]byte, 0, 2*len(sym)), max: 3 * len(sym)}
	mode, array, narg := javaPrefix, 0, 0
	for i := 0; i < end && len(b.b) < b.max; i++ {
		c := sym[i]
		switch c {
		case 'L':
			switch mode {
			case javaPrefix:
				mode = javaClass
			case javaType:
				if narg > 0 {
					b.str(", ")
				}
				narg++
				mode = javaClassType
			default:
				b.byte(c)
			}
		case 'B', 'C', 'D', 'F', 'I', 'J', 'S', 'Z', 'V':
			if mode != javaType {
				b.byte(c)
				break
			}
			if c == 'V' {
				b.str("void")
			} else {
				if narg > 0 {
					b.str(", ")
				}
				b.str(javaBaseTypes[c-'A'])
				narg++
			}
			for ; array > 0; array-- {
				b.str("[]")
			}
		case '[':
			if mode != javaType {
				return "", false
			}
			array++
		case '(':
			if mode != javaFunc {
				return "", false
			}
			b.byte(c)
			mode = javaType
		case ')':
			if mode != javaType {
				return "", false
			}
			b.byte(c)
			narg = 0
		case ';':
			switch mode {
			case javaClass:
				if i+1 < len(sym) && isAlpha(sym[i+1]) {
					b.str(".")
				}
				mode = javaFunc
			case javaClassType:
				mode = javaType
			default:
				return "", false
			}
		case '/':
			if mode != javaClass && mode != javaClassType {
				return "", false
			}
			b.str(".")
		default:
			b.byte(c)
		}
	}
	return string(b.b), true
}

// javaBuf reproduces perf's fixed-size output buffer: writes stop at max
// bytes, as scnprintf stops at the end of the buffer.
type javaBuf struct {
	b   []byte
	max int
}

func (j *javaBuf) byte(c byte) { j.b = append(j.b, c) }

func (j *javaBuf) str(s string) {
	if n := j.max - len(j.b); len(s) > n {
		s = s[:n]
	}
	j.b = append(j.b, s...)
}
