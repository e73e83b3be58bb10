/* SPDX-License-Identifier: MIT */
/*
 * vfork(): marks the calling thread (smcr_vfork_prepare, see init.c and
 * preload.h) and then jumps, not calls, into libc's vfork, so that both the
 * child and the parent return straight to the program with nothing of ours
 * on the shared stack.
 *
 * Architectures without this entry point get vfork = fork (init.c), which
 * keeps the fd table right at the cost of a real fork.
 */
#if defined(__x86_64__)
	.text
	.globl	vfork
	.type	vfork, @function
vfork:
	.cfi_startproc
#if defined(__CET__)
	endbr64
#endif
	subq	$8, %rsp		/* 16-byte alignment for the C call */
	.cfi_adjust_cfa_offset 8
	call	smcr_vfork_prepare
	addq	$8, %rsp
	.cfi_adjust_cfa_offset -8
	jmp	*%rax
	.cfi_endproc
	.size	vfork, .-vfork
#endif
	.section .note.GNU-stack, "", @progbits
