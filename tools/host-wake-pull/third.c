/*
 * Is it who ended the waker's idle? A fresh wakee blocks with CPU 1 as its
 * previous CPU; the waker, pinned to CPU 0, waits blocked on a pipe until either a
 * third task on CPU 1 (MUTUAL 0) or the wakee itself, just before it blocks
 * (MUTUAL 1), wakes it from CPU 1; the waker then wakes the wakee at once.
 *
 *   cc -O2 -o /tmp/third tools/host-wake-pull/third.c && /tmp/third ROUNDS MUTUAL
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
int main(int argc,char**argv){
  int rounds=atoi(argv[1]); int mutual=atoi(argv[2]);
  allow(1); prctl(PR_SET_TIMERSLACK,1UL,0,0,0);
  int pulled=0, stayed=0;
  for(int r=0;r<rounds;r++){
    int ready[2],wake[2],res[2],kick[2]; pipe(ready); pipe(wake); pipe(res); pipe(kick); char c=0;
    pid_t ch=fork();
    if(ch==0){ /* wakee B */
      allow(2); allow(3);
      if(mutual){ /* B itself wakes A from CPU 1, then blocks */
        read(ready[0],&c,1); /* wait for go (A is blocked on kick) */
        write(kick[1],&c,1);
      } else write(ready[1],&c,1);
      read(wake[0],&c,1); c=(char)sched_getcpu(); write(res[1],&c,1); _exit(0);
    }
    pid_t d=-1;
    if(mutual){ usleep(100); write(ready[1],&c,1); read(kick[0],&c,1); }
    else {
      read(ready[0],&c,1); usleep(100);
      d=fork();
      if(d==0){ allow(2); usleep(50); write(kick[1],&c,1); _exit(0); } /* D on CPU 1 wakes A */
      read(kick[0],&c,1);
    }
    write(wake[1],&c,1); read(res[0],&c,1);
    if(c==0) pulled++; else stayed++;
    waitpid(ch,0,0); if(d>0) waitpid(d,0,0);
    close(ready[0]);close(ready[1]);close(wake[0]);close(wake[1]);close(res[0]);close(res[1]);close(kick[0]);close(kick[1]);
  }
  printf("%s woke the waker from CPU 1 just before: pulled %d, stayed %d\n", mutual?"the wakee itself":"a third task", pulled, stayed);
  return 0;
}
