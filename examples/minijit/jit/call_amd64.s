#include "textflag.h"

// The registers are those code_amd64.go documents.

// func Call(fn, n uint64) uint64
TEXT ·Call(SB), NOSPLIT, $0-24
	MOVQ fn+0(FP), DX
	MOVQ n+8(FP), CX
	CALL DX
	MOVQ AX, ret+16(FP)
	RET

// func Drive(driver, kernel, n, calls uint64) uint64
TEXT ·Drive(SB), NOSPLIT, $0-40
	MOVQ driver+0(FP), R9
	MOVQ kernel+8(FP), DX
	MOVQ n+16(FP), SI
	MOVQ calls+24(FP), DI
	CALL R9
	MOVQ AX, ret+32(FP)
	RET
