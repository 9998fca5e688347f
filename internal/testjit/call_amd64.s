#include "textflag.h"

// func Call(fn, n uint64) uint64
TEXT ·Call(SB), NOSPLIT, $0-24
	MOVQ fn+0(FP), DX
	MOVQ n+8(FP), CX
	CALL DX
	MOVQ AX, ret+16(FP)
	RET
