/*
 * The same question as pull.c with a fresh wakee every round (no history: no
 * recent_used_cpu, no wakee flips, never moved back): a child pins itself to
 * CPU 1, allows both CPUs and blocks on a pipe; the waker, pinned to CPU 0,
 * sleeps 100 us, then spins SPIN_US or sleeps SLEEP_US (timer slack 1 ns) and
 * wakes it; the child reports the CPU it woke on and exits.
 *
 *   cc -O2 -o /tmp/fresh tools/host-wake-pull/fresh.c
 *   /tmp/fresh ROUNDS SLEEP_US [SPIN_US]
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <sys/prctl.h>
#include <sys/wait.h>
static void allow(int mask){cpu_set_t s;CPU_ZERO(&s);for(int i=0;i<2;i++) if(mask&(1<<i)) CPU_SET(i,&s); if(sched_setaffinity(0,sizeof s,&s)){perror("aff");exit(2);}}
static void spin_us(int us){struct timespec a,b;clock_gettime(CLOCK_MONOTONIC,&a);do clock_gettime(CLOCK_MONOTONIC,&b);while((b.tv_sec-a.tv_sec)*1000000000L+(b.tv_nsec-a.tv_nsec)<us*1000L);}
int main(int argc,char**argv){
  int rounds=atoi(argv[1]), sleep_us=atoi(argv[2]), spin=argc>3?atoi(argv[3]):0;
  allow(1); prctl(PR_SET_TIMERSLACK,1UL,0,0,0);
  int pulled=0, stayed=0;
  for(int r=0;r<rounds;r++){
    int ready[2],wake[2],res[2]; pipe(ready); pipe(wake); pipe(res); char c=0;
    pid_t ch=fork();
    if(ch==0){ allow(2); allow(3); write(ready[1],&c,1); read(wake[0],&c,1); c=(char)sched_getcpu(); write(res[1],&c,1); _exit(0); }
    read(ready[0],&c,1);
    usleep(100); /* let the child block */
    if(spin) spin_us(spin);
    if(sleep_us) usleep(sleep_us);
    write(wake[1],&c,1); read(res[0],&c,1);
    if(c==0) pulled++; else stayed++;
    waitpid(ch,0,0); close(ready[0]);close(ready[1]);close(wake[0]);close(wake[1]);close(res[0]);close(res[1]);
  }
  printf("fresh wakee, waker %s %d us before the wakeup: pulled %d, stayed %d\n", spin?"spins":"sleeps", spin?spin:sleep_us, pulled, stayed);
  return 0;
}
