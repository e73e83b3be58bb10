/* SPDX-License-Identifier: MIT */
/*
 * vfork(): marks the calling thread (smcr_vfork_prepare, see init.c and
 * preload.h) and then jumps, not calls, into libc's vfork, so that the
 * child returns straight to the program with nothing of ours on the shared
 * stack.  The program's return address waits in a TLS slot meanwhile, and
 * libc's vfork returns to .Lresume instead: the child (0) and a failure
 * (-1) go on at once through the slot; the parent, which runs again only
 * once the child has exec'd or exited, first calls
 * smcr_vfork_parent_resume(pid), so that what the child's exec left for the
 * parent to do (handoff.c) is done before the program's next instruction.
 * The child runs on the parent's TLS: the slot is read before the child
 * can run anything else of ours, and a vfork child never vforks.
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
	movq	%rax, %r11		/* libc's vfork */
	movq	smcr_vfork_ret@GOTTPOFF(%rip), %rcx
	popq	%rdx			/* the program's return address ... */
	.cfi_adjust_cfa_offset -8
	movq	%rdx, %fs:(%rcx)	/* ... waits in the slot */
	leaq	.Lresume(%rip), %rdx
	pushq	%rdx
	.cfi_adjust_cfa_offset 8
	jmp	*%r11
.Lresume:
	/* the stack as the program's own return would leave it (16-aligned) */
	.cfi_adjust_cfa_offset -8
	testl	%eax, %eax
	jle	.Lreturn		/* the child, or no child */
	pushq	%rax
	.cfi_adjust_cfa_offset 8
	subq	$8, %rsp
	.cfi_adjust_cfa_offset 8
	movl	%eax, %edi
	call	smcr_vfork_parent_resume
	addq	$8, %rsp
	.cfi_adjust_cfa_offset -8
	popq	%rax
	.cfi_adjust_cfa_offset -8
.Lreturn:
	movq	smcr_vfork_ret@GOTTPOFF(%rip), %rcx
	jmp	*%fs:(%rcx)
	.cfi_endproc
	.size	vfork, .-vfork
#endif
	.section .note.GNU-stack, "", @progbits
