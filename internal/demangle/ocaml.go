package demangle

// demangleOCaml follows perf's demangle-ocaml.c: an OCaml symbol is
// "caml" followed by an upper-case letter; "__" separates module path
// components and "$xx" encodes a byte in hex.
func demangleOCaml(sym string) (string, bool) {
	const prefix = "caml"
	if len(sym) <= len(prefix) || sym[:len(prefix)] != prefix || !isUpper(sym[len(prefix)]) {
		return "", false
	}
	b := make([]byte, 0, len(sym)-len(prefix))
	for i := len(prefix); i < len(sym); {
		switch {
		case sym[i] == '_' && i+1 < len(sym) && sym[i+1] == '_':
			b = append(b, '.')
			i += 2
		case sym[i] == '$' && i+2 < len(sym) && isHex(sym[i+1]) && isHex(sym[i+2]):
			b = append(b, unhex(sym[i+1])<<4|unhex(sym[i+2]))
			i += 3
		default:
			b = append(b, sym[i])
			i++
		}
	}
	return string(b), true
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	}
	return c - 'a' + 10
}

// isUpper and isAlpha classify bytes as the kernel's ctype table does,
// which perf's demanglers use: Latin-1 letters count as letters.
func isUpper(c byte) bool {
	return 'A' <= c && c <= 'Z' || 0xc0 <= c && c <= 0xde && c != 0xd7
}

func isAlpha(c byte) bool {
	return isUpper(c) || 'a' <= c && c <= 'z' || 0xdf <= c && c != 0xf7
}
