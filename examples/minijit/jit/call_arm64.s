#include "textflag.h"

// The registers are those code_arm64.go documents. The frames are not
// empty so that the assembler saves LR, which the calls overwrite.

// func Call(fn, n uint64) uint64
TEXT ·Call(SB), NOSPLIT, $16-24
	MOVD fn+0(FP), R9
	MOVD n+8(FP), R0
	CALL (R9)
	MOVD R0, ret+16(FP)
	RET

// func Drive(driver, kernel, n, calls uint64) uint64
TEXT ·Drive(SB), NOSPLIT, $16-40
	MOVD driver+0(FP), R9
	MOVD kernel+8(FP), R2
	MOVD n+16(FP), R3
	MOVD calls+24(FP), R4
	CALL (R9)
	MOVD R0, ret+32(FP)
	RET

// func flushICache(addr, n uintptr)
// Cleans the data cache to the point of unification and invalidates the
// instruction cache over [addr, addr+n), the sequence the architecture
// prescribes for new code. It steps by one instruction, whatever the cache
// line sizes are, because the code is a few dozen bytes.
TEXT ·flushICache(SB), NOSPLIT, $0-16
	MOVD addr+0(FP), R0
	MOVD n+8(FP), R1
	ADD  R0, R1, R1
	MOVD R0, R2
clean:
	WORD $0xd50b7b22 // dc cvau, x2
	ADD  $4, R2
	CMP  R1, R2
	BLO  clean
	WORD $0xd5033b9f // dsb ish
	MOVD R0, R2
invalidate:
	WORD $0xd50b7522 // ic ivau, x2
	ADD  $4, R2
	CMP  R1, R2
	BLO  invalidate
	WORD $0xd5033b9f // dsb ish
	WORD $0xd5033fdf // isb
	RET
