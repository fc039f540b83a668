/* The pod sandbox process of ktest's kind node images: sleeps until told to stop,
 * reaping any zombie the pod's shared PID namespace hands it. Exit 0 on SIGINT/SIGTERM. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void stop(int signal_number) {
    (void)signal_number;
    _exit(0);
}

static void reap(int signal_number) {
    (void)signal_number;
    while (waitpid(-1, NULL, WNOHANG) > 0) {
    }
}

int main(int argc, char **argv) {
    if (argc > 1 && (strcmp(argv[1], "-v") == 0 || strcmp(argv[1], "--version") == 0)) {
        printf("ktest pause\n");
        return 0;
    }
    if (getpid() != 1) {
        fprintf(stderr, "warning: pause should be the first process (pid 1)\n");
    }
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = stop;
    sigaction(SIGINT, &action, NULL);
    sigaction(SIGTERM, &action, NULL);
    action.sa_handler = reap;
    action.sa_flags = SA_NOCLDSTOP;
    sigaction(SIGCHLD, &action, NULL);
    for (;;) {
        pause();
    }
}
