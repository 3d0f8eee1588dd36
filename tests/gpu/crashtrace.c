/* crashtrace: an LD_PRELOAD helper for the GPU checks (tests/gpu/run.sh
 * ibdiag). On a fatal signal it writes where the faulting thread was to
 * stderr: the signal, the faulting address, the thread's name, the program
 * counter and the caller (object + offset, and the exported symbol where
 * there is one), then the backtrace, and lets the default action run.
 *
 * Why: a rank that dies inside a closed library (NCCL's net_ib over the
 * software RDMA device) loses its buffered stdout, and the GPU machine may
 * have no debugger. Built there with cc; never part of the project build. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <execinfo.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <ucontext.h>
#include <unistd.h>

static void put(const char *s)
{
	size_t n = strlen(s);
	while (n > 0) {
		ssize_t w = write(2, s, n);
		if (w <= 0)
			return;
		s += w;
		n -= (size_t)w;
	}
}

/* One line per address: object+offset (what objdump -d wants) and the
 * nearest exported symbol (misleading inside stripped code: shown as a hint) */
static void where(const char *what, void *pc)
{
	char line[768];
	Dl_info di;
	if (pc && dladdr(pc, &di) && di.dli_fname)
		snprintf(line, sizeof line, "crashtrace:   %s %p %s+0x%lx [%s+0x%lx]\n", what, pc,
			 di.dli_fname, (unsigned long)((uintptr_t)pc - (uintptr_t)di.dli_fbase),
			 di.dli_sname ? di.dli_sname : "?",
			 di.dli_saddr ? (unsigned long)((uintptr_t)pc - (uintptr_t)di.dli_saddr)
				      : 0ul);
	else
		snprintf(line, sizeof line, "crashtrace:   %s %p (in no loaded object)\n", what,
			 pc);
	put(line);
}

static void on_fatal(int sig, siginfo_t *si, void *ucv)
{
	char line[256], name[17] = {0};
	prctl(PR_GET_NAME, name, 0, 0, 0);
	snprintf(line, sizeof line, "crashtrace: pid %d thread '%s': signal %d (%s), address %p\n",
		 (int)getpid(), name, sig, strsignal(sig), si ? si->si_addr : NULL);
	put(line);
	ucontext_t *uc = ucv;
	void *pc = NULL, *ret = NULL;
#if defined(__x86_64__)
	pc = (void *)uc->uc_mcontext.gregs[REG_RIP];
	/* a call through a NULL pointer leaves the caller's return address on top
	 * of the stack: that is the useful frame then */
	void **sp = (void **)uc->uc_mcontext.gregs[REG_RSP];
	if (sp)
		ret = sp[0];
#elif defined(__aarch64__)
	pc = (void *)uc->uc_mcontext.pc;
	ret = (void *)uc->uc_mcontext.regs[30];
#endif
	where("pc ", pc);
	where("ret", ret);
	void *bt[48];
	int n = backtrace(bt, 48);
	put("crashtrace: backtrace\n");
	for (int i = 0; i < n; i++)
		where("at ", bt[i]);
	signal(sig, SIG_DFL);
	raise(sig);
}

__attribute__((constructor)) static void crashtrace_init(void)
{
	/* backtrace() loads libgcc_s on first use: do it now, not in the handler */
	void *warm[2];
	(void)backtrace(warm, 2);
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = on_fatal;
	sa.sa_flags = SA_SIGINFO | SA_RESETHAND;
	sigemptyset(&sa.sa_mask);
	int sigs[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
	for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
		sigaction(sigs[i], &sa, NULL);
}
