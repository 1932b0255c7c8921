/* The aarch64 switch under qemu: see run.sh. Two contexts keep values in
 * callee-saved registers across 1,000 switches each way. With FP_STATE (the
 * `fp-state` feature's switch), main runs with a non-default FPCR (round to
 * +inf, flush-to-zero), the coroutine with the default one, and each must
 * see only its own; without it, both keep the default FPCR. */
#include <stdio.h>
#include <stdint.h>
#include <string.h>
#include <stdlib.h>
void co_switch(void **save, void *to);
void co_trampoline(void);
static void *main_sp, *co_sp;
static volatile uint64_t seen_fpcr = 123;
static volatile int steps = 0;
static uint64_t get_fpcr(void){ uint64_t v; __asm__ volatile("mrs %0, fpcr":"=r"(v)); return v; }
static void set_fpcr(uint64_t v){ __asm__ volatile("msr fpcr, %0"::"r"(v)); }
/* Same layout as init_frame in aarch64.rs: 24 words below top. */
static void *init_frame(uint64_t *top, void (*entry)(void*), void *arg){
  uint64_t *w = top - 24; memset(w, 0, 24*8);
  w[0] = (uint64_t)arg; w[1] = (uint64_t)entry; w[10] = 0; w[11] = (uint64_t)co_trampoline; w[20] = 0;
  return w;
}
__attribute__((noinline)) static double work(double a, int i){ return a * 1.0000001 + i; }
static void entry(void *arg){
  if ((uint64_t)arg != 0xABCD) { printf("bad arg\n"); exit(1); }
  if (((uintptr_t)__builtin_frame_address(0) & 15) != 0) { printf("misaligned\n"); exit(1); }
  seen_fpcr = get_fpcr();
  /* values in callee-saved registers across switches, on the coroutine side */
  volatile double keep = 0.5; double d1 = 1.25, d2 = 2.5; long a = 11, b = 22, c = 33;
  for (int i = 0;; i++) {
    steps++;
    co_switch(&co_sp, main_sp);
    d1 = work(d1, i); d2 = work(d2, i); a += i; b += a; c += b;
    if (i == 999) {
      printf("coroutine side: d1=%.6f d2=%.6f a=%ld b=%ld c=%ld keep=%f\n", d1, d2, a, b, c, keep);
      /* the same loop without coroutines gives these (default FPCR) */
      if (a != 499511 || b != 166677522 || c != 41755485783L || keep != 0.5
          || d1 < 499517.867238 || d1 > 499517.867240) { printf("FAIL: coroutine registers\n"); exit(1); }
    }
  }
}
int main(void){
  uint64_t *stack = aligned_alloc(16, 1<<16);
  co_sp = init_frame(stack + (1<<16)/8, entry, (void*)0xABCD);
#ifdef FP_STATE
  uint64_t mine = (1u << 22) | (1u << 24); /* RMode = +inf, FZ */
#else
  uint64_t mine = 0; /* the default switch shares one FPCR: keep the default */
#endif
  set_fpcr(mine);
  double x1 = 3.0, x2 = 4.0; long p = 1, q = 2, r = 3;
  for (int i = 0; i < 1000; i++) {
    co_switch(&main_sp, co_sp);
    x1 = work(x1, i); x2 = work(x2, -i); p += i; q ^= p; r += q;
    if (get_fpcr() != mine) { printf("FAIL: main's FPCR not restored: %lx\n", (unsigned long)get_fpcr()); return 1; }
  }
  co_switch(&main_sp, co_sp); /* one more so the coroutine prints at i == 999 */
  printf("main side: x1=%.6f x2=%.6f p=%ld q=%ld r=%ld\n", x1, x2, p, q, r);
  if (p != 499501 || q != 190898 || r != 102835321) { printf("FAIL: main registers\n"); return 1; }
  printf("coroutine started with FPCR=%lx (expect 0), steps=%d\n", (unsigned long)seen_fpcr, steps);
  set_fpcr(0);
  return (seen_fpcr == 0 && steps == 1001) ? 0 : 1;
}
