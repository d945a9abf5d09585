/* belvedir-taskd: a task sandbox's exec server (docs/task-sandboxes.md, sandboxes/taskd.py).
 *
 * Started as the task container's command instead of `sleep infinity`, from a read-only bind
 * mount of the host's static build (no library of the image is used: task images need not
 * have Python, bash or a libc of ours). It listens on TCP port TASKD_PORT of the container's
 * own address and runs one command per connection, so the platform runs a command without
 * `docker exec` (under gVisor each `runsc exec` costs ~50 ms more than the command; bench/).
 *
 * The process belongs to the task: the task runs as root beside it and may read its token,
 * kill it or answer in its place. So nothing here is a limit the platform relies on: the
 * platform bounds every frame, enforces its own deadline and byte counts, and reads the
 * exit status as the task's word, as it reads the task's output (sandboxes/taskd.py). What
 * the token keeps out is anyone else on the network (inter-container traffic is off too).
 *
 * A connection, with TOKEN the container's own (its command's argument, then wiped from it;
 * never sent on the wire): the platform sends "BTD2" and 16 random bytes C; the server
 * answers 16 random bytes S and HMAC-SHA256(TOKEN, "server" C S), so the platform knows it
 * reached this container's server, not whatever now holds a reused address, before it sends
 * anything; the platform then sends HMAC-SHA256(TOKEN, "client" S C), a 4-byte big-endian
 * length and that many bytes of NUL-terminated fields: user ("" the container's, else
 * name|uid[:group|gid]), cwd ("" the container's), "1" where the container's configured env
 * has HOME (which a switched user keeps, as the engine's exec does; else the user's own
 * home), the mode ("" a command; "t" a file transfer: 's' is sent once the program started,
 * and what follows the request is the command's stdin up to the platform's half-close, which
 * then does not end it), the time limit in ms ("" none: past it the command's process group
 * is killed, as `timeout -s KILL` would, one process fewer to start), argc, argv..., envc,
 * "KEY=VALUE"... (over the container's own env). Frames back: a type byte, a 4-byte
 * big-endian length, the payload: 'o' stdout and 'e' stderr (1 to FRAME_MAX bytes each),
 * then 'x' and the exit code in decimal (128+N for signal N, as the engine reports). Or 'f'
 * and a reason, as the first frame, when this server did not run the command (a user it
 * cannot resolve or switch to, a cwd it cannot enter, a program it cannot start): the
 * platform then runs it by `docker exec`, so the engine's own message and semantics apply. A
 * wrong proof gets nothing. The connection closing before 'x' kills the command's process
 * group: the platform's deadline ends the command as well as the wait.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define TASKD_PORT 51117
#define REQUEST_MAX (4 << 20) /* argv and env together, as the kernel's ARG_MAX bounds */
#define FRAME_MAX 65536
#define DRAIN_MS 2000 /* after the command exits, output still held open: as the engine waits */
#define GROUPS_MAX 256

extern char **environ;
static char token[256];
static int sigchld_pipe[2];
static volatile pid_t limited; /* the command's process group, killed when its time is up */

/* SHA-256 (FIPS 180-4) and HMAC (RFC 2104): the connection's proofs. */
static const uint32_t K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
    0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
    0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
    0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
    0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
    0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
    0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
    0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
    0xc67178f2};

struct sha256 {
  uint32_t h[8];
  unsigned char block[64];
  size_t used;
  uint64_t bytes;
};

#define ROR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))

static void sha256_block(struct sha256 *c, const unsigned char *p) {
  uint32_t w[64], a, b, d, e, f, g, h, cc;
  for (int i = 0; i < 16; i++)
    w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 |
           (uint32_t)p[4 * i + 3];
  for (int i = 16; i < 64; i++) {
    uint32_t s0 = ROR(w[i - 15], 7) ^ ROR(w[i - 15], 18) ^ (w[i - 15] >> 3);
    uint32_t s1 = ROR(w[i - 2], 17) ^ ROR(w[i - 2], 19) ^ (w[i - 2] >> 10);
    w[i] = w[i - 16] + s0 + w[i - 7] + s1;
  }
  a = c->h[0], b = c->h[1], cc = c->h[2], d = c->h[3];
  e = c->h[4], f = c->h[5], g = c->h[6], h = c->h[7];
  for (int i = 0; i < 64; i++) {
    uint32_t t1 = h + (ROR(e, 6) ^ ROR(e, 11) ^ ROR(e, 25)) + ((e & f) ^ (~e & g)) + K[i] + w[i];
    uint32_t t2 = (ROR(a, 2) ^ ROR(a, 13) ^ ROR(a, 22)) + ((a & b) ^ (a & cc) ^ (b & cc));
    h = g, g = f, f = e, e = d + t1, d = cc, cc = b, b = a, a = t1 + t2;
  }
  c->h[0] += a, c->h[1] += b, c->h[2] += cc, c->h[3] += d;
  c->h[4] += e, c->h[5] += f, c->h[6] += g, c->h[7] += h;
}

static void sha256_init(struct sha256 *c) {
  static const uint32_t start[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                    0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  memcpy(c->h, start, sizeof start);
  c->used = 0;
  c->bytes = 0;
}

static void sha256_add(struct sha256 *c, const void *data, size_t size) {
  const unsigned char *p = data;
  c->bytes += size;
  while (size > 0) {
    size_t take = 64 - c->used < size ? 64 - c->used : size;
    memcpy(c->block + c->used, p, take);
    c->used += take, p += take, size -= take;
    if (c->used == 64) {
      sha256_block(c, c->block);
      c->used = 0;
    }
  }
}

static void sha256_end(struct sha256 *c, unsigned char out[32]) {
  uint64_t bits = c->bytes * 8;
  unsigned char pad = 0x80, zero = 0, length[8];
  sha256_add(c, &pad, 1);
  while (c->used != 56) sha256_add(c, &zero, 1);
  for (int i = 0; i < 8; i++) length[i] = (unsigned char)(bits >> (56 - 8 * i));
  sha256_add(c, length, 8);
  for (int i = 0; i < 8; i++) {
    out[4 * i] = (unsigned char)(c->h[i] >> 24), out[4 * i + 1] = (unsigned char)(c->h[i] >> 16);
    out[4 * i + 2] = (unsigned char)(c->h[i] >> 8), out[4 * i + 3] = (unsigned char)c->h[i];
  }
}

/* HMAC-SHA256(token, label a b), a and b 16 bytes each. */
static void proof(const char *label, const unsigned char *a, const unsigned char *b,
                  unsigned char out[32]) {
  unsigned char key[64] = {0}, pad[64], inner[32];
  size_t size = strlen(token);
  if (size > 64) {
    struct sha256 c;
    sha256_init(&c);
    sha256_add(&c, token, size);
    sha256_end(&c, key);
  } else {
    memcpy(key, token, size);
  }
  struct sha256 c;
  for (int i = 0; i < 64; i++) pad[i] = key[i] ^ 0x36;
  sha256_init(&c);
  sha256_add(&c, pad, 64);
  sha256_add(&c, label, strlen(label));
  sha256_add(&c, a, 16);
  sha256_add(&c, b, 16);
  sha256_end(&c, inner);
  for (int i = 0; i < 64; i++) pad[i] = key[i] ^ 0x5c;
  sha256_init(&c);
  sha256_add(&c, pad, 64);
  sha256_add(&c, inner, 32);
  sha256_end(&c, out);
}

static void on_limit(int sig) {
  (void)sig;
  int saved = errno;
  if (limited > 0) kill(-limited, SIGKILL);
  errno = saved;
}

static void on_sigchld(int sig) {
  (void)sig;
  int saved = errno;
  if (write(sigchld_pipe[1], "c", 1) < 0) {
  }
  errno = saved;
}

static int write_all(int fd, const void *data, size_t size) {
  const char *p = data;
  while (size > 0) {
    ssize_t n = write(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return -1;
    p += n;
    size -= (size_t)n;
  }
  return 0;
}

static int read_all(int fd, void *data, size_t size) {
  char *p = data;
  while (size > 0) {
    ssize_t n = read(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return -1;
    p += n;
    size -= (size_t)n;
  }
  return 0;
}

static int frame(int fd, char type, const void *data, size_t size) {
  unsigned char head[5] = {(unsigned char)type, (unsigned char)(size >> 24),
                           (unsigned char)(size >> 16), (unsigned char)(size >> 8),
                           (unsigned char)size};
  if (write_all(fd, head, 5) < 0) return -1;
  return size ? write_all(fd, data, size) : 0;
}

static void fall_back(int fd, const char *why) {
  frame(fd, 'f', why, strlen(why));
  _exit(0);
}

/* The next NUL-terminated field of the request, or NULL past its end. */
static char *field(char **at, char *end) {
  char *start = *at;
  if (start >= end) return NULL;
  char *nul = memchr(start, '\0', (size_t)(end - start));
  if (nul == NULL) return NULL;
  *at = nul + 1;
  return start;
}

static int number(const char *text, long max, long *out) {
  if (*text == '\0') return -1;
  long value = 0;
  for (const char *c = text; *c; c++) {
    if (*c < '0' || *c > '9') return -1;
    value = value * 10 + (*c - '0');
    if (value > max) return -1;
  }
  *out = value;
  return 0;
}

/* A line of /etc/passwd or /etc/group split at ':' into at most `most` parts. */
static int split(char *line, char **parts, int most) {
  int n = 0;
  parts[n++] = line;
  for (char *c = line; *c && n < most; c++) {
    if (*c == ':') {
      *c = '\0';
      parts[n++] = c + 1;
    }
  }
  char *nl = strchr(parts[n - 1], '\n');
  if (nl) *nl = '\0';
  return n;
}

struct who {
  uid_t uid;
  gid_t gid;
  char name[256];
  char home[1024];
  gid_t groups[GROUPS_MAX];
  int ngroups;
};

/* Find the passwd entry by name, or by uid when `name` is NULL. */
static int passwd_entry(const char *name, uid_t uid, struct who *who) {
  FILE *f = fopen("/etc/passwd", "re");
  if (f == NULL) return -1;
  char line[4096];
  int found = -1;
  while (fgets(line, sizeof line, f)) {
    char *p[7];
    long id, gid;
    if (split(line, p, 7) < 7 || number(p[2], 0x7fffffff, &id) < 0 ||
        number(p[3], 0x7fffffff, &gid) < 0)
      continue;
    if (name ? strcmp(p[0], name) == 0 : (uid_t)id == uid) {
      who->uid = (uid_t)id;
      who->gid = (gid_t)gid;
      snprintf(who->name, sizeof who->name, "%s", p[0]);
      snprintf(who->home, sizeof who->home, "%s", p[5]);
      found = 0;
      break;
    }
  }
  fclose(f);
  return found;
}

/* The group's gid by name (when `gid_out` is set), and the groups that list `member`. */
static int group_entries(const char *group, gid_t *gid_out, const char *member, struct who *who) {
  FILE *f = fopen("/etc/group", "re");
  if (f == NULL) return group ? -1 : 0;
  char line[8192];
  int found = group ? -1 : 0;
  while (fgets(line, sizeof line, f)) {
    char *p[4];
    long gid;
    if (split(line, p, 4) < 4 || number(p[2], 0x7fffffff, &gid) < 0) continue;
    if (group && strcmp(p[0], group) == 0 && found < 0) {
      *gid_out = (gid_t)gid;
      found = 0;
    }
    if (member[0] && who->ngroups < GROUPS_MAX) {
      for (char *m = strtok(p[3], ","); m; m = strtok(NULL, ",")) {
        if (strcmp(m, member) == 0) {
          who->groups[who->ngroups++] = (gid_t)gid;
          break;
        }
      }
    }
  }
  fclose(f);
  return found;
}

/* `spec` (name|uid[:group|gid]) as the engine resolves it in the container's own files. */
static int resolve(char *spec, struct who *who) {
  memset(who, 0, sizeof *who);
  char *group = strchr(spec, ':');
  if (group) *group++ = '\0';
  int explicit_group = group != NULL;
  long id;
  if (number(spec, 0x7fffffff, &id) == 0) {
    if (passwd_entry(NULL, (uid_t)id, who) < 0) {
      who->uid = (uid_t)id;
      who->gid = 0;
      snprintf(who->home, sizeof who->home, "/");
    }
  } else if (passwd_entry(spec, 0, who) < 0) {
    return -1;
  }
  gid_t gid = who->gid;
  if (group && number(group, 0x7fffffff, &id) == 0) {
    gid = (gid_t)id;
    group = NULL;
  }
  /* Supplementary groups only for a user without an explicit group, as runc resolves it. */
  if (group_entries(group, &gid, explicit_group ? "" : who->name, who) < 0) return -1;
  who->gid = gid;
  return 0;
}

/* The command's env: this process's (the container's), the request's over it. */
static char **command_env(char **extra, long count, const struct who *who) {
  long own = 0;
  while (environ[own]) own++;
  char **env = calloc((size_t)(own + count + 2), sizeof *env);
  if (env == NULL) return NULL;
  long n = 0;
  for (long i = 0; i < own; i++) {
    if (who && strncmp(environ[i], "HOME=", 5) == 0) continue; /* the user's own home */
    env[n++] = environ[i];
  }
  int home = 0;
  for (long i = 0; i < count; i++) {
    size_t key = strcspn(extra[i], "=");
    if (strncmp(extra[i], "HOME=", 5) == 0) home = 1;
    long j = 0;
    while (j < n && !(strncmp(env[j], extra[i], key) == 0 && env[j][key] == '=')) j++;
    env[j] = extra[i];
    if (j == n) n++;
  }
  if (who && !home) {
    char *line = malloc(strlen(who->home) + 7);
    if (line == NULL) return NULL;
    sprintf(line, "HOME=%s", who->home[0] ? who->home : "/");
    env[n++] = line;
  }
  env[n] = NULL;
  return env;
}

static long now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1000L + t.tv_nsec / 1000000L;
}

static void serve(int sock) {
  signal(SIGPIPE, SIG_IGN);
  signal(SIGCHLD, SIG_DFL);
  alarm(30); /* a request that never arrives whole */
  unsigned char hello[20], mine[48], theirs[36], expected[32];
  if (read_all(sock, hello, 4) < 0 || memcmp(hello, "BTD2", 4) != 0 ||
      read_all(sock, hello + 4, 16) < 0)
    _exit(0); /* anything else (an HTTP probe, the old protocol) is closed on at once */
  if (getrandom(mine, 16, 0) != 16) _exit(0);
  proof("server", hello + 4, mine, mine + 16);
  if (write_all(sock, mine, 48) < 0 || read_all(sock, theirs, 36) < 0) _exit(0);
  proof("client", mine, hello + 4, expected);
  unsigned char differ = 0;
  for (int i = 0; i < 32; i++) differ |= (unsigned char)(theirs[i] ^ expected[i]);
  if (differ) _exit(0); /* not the platform: nothing is read or run */
  uint32_t size = (uint32_t)theirs[32] << 24 | (uint32_t)theirs[33] << 16 |
                  (uint32_t)theirs[34] << 8 | (uint32_t)theirs[35];
  if (size > REQUEST_MAX) _exit(0);
  char *request = malloc(size + 1);
  if (request == NULL || read_all(sock, request, size) < 0) _exit(0);
  alarm(0);
  char *at = request, *end = request + size;

  char *user = field(&at, end), *cwd = field(&at, end), *keep_home = field(&at, end);
  char *mode = field(&at, end), *limit = field(&at, end), *count = field(&at, end);
  long argc, envc, limit_ms = 0;
  if (user == NULL || cwd == NULL || keep_home == NULL || mode == NULL || limit == NULL ||
      count == NULL || number(count, 65536, &argc) < 0 || argc < 1 ||
      (limit[0] && number(limit, 1L << 40, &limit_ms) < 0))
    fall_back(sock, "a malformed request");
  int transfer = strcmp(mode, "t") == 0;
  char **argv = calloc((size_t)argc + 1, sizeof *argv);
  for (long i = 0; i < argc; i++)
    if (argv == NULL || (argv[i] = field(&at, end)) == NULL) fall_back(sock, "a malformed request");
  count = field(&at, end);
  if (count == NULL || number(count, 1 << 20, &envc) < 0) fall_back(sock, "a malformed request");
  char **extra = calloc((size_t)envc + 1, sizeof *extra);
  for (long i = 0; i < envc; i++)
    if (extra == NULL || (extra[i] = field(&at, end)) == NULL || !strchr(extra[i], '='))
      fall_back(sock, "a malformed request");

  struct who who;
  if (user[0] && resolve(user, &who) < 0) fall_back(sock, "the user is not in the image's files");
  if (cwd[0] && chdir(cwd) < 0) fall_back(sock, "the working directory cannot be entered");
  char **env = command_env(extra, envc, user[0] && strcmp(keep_home, "1") != 0 ? &who : NULL);
  int in[2] = {-1, -1}, out[2], err[2], failed[2];
  if (env == NULL || pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0 ||
      pipe2(failed, O_CLOEXEC) < 0 || pipe2(sigchld_pipe, O_CLOEXEC | O_NONBLOCK) < 0 ||
      (transfer && pipe2(in, O_CLOEXEC) < 0))
    fall_back(sock, "no resources for the command");
  struct sigaction on_child = {.sa_handler = on_sigchld, .sa_flags = SA_NOCLDSTOP | SA_RESTART};
  sigaction(SIGCHLD, &on_child, NULL);
  pid_t pid = fork();
  if (pid < 0) fall_back(sock, "no process for the command");
  if (pid == 0) {
    signal(SIGPIPE, SIG_DFL);
    signal(SIGCHLD, SIG_DFL);
    setpgid(0, 0);
    int input = transfer ? in[0] : open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (input < 0 || dup2(input, 0) < 0 || dup2(out[1], 1) < 0 || dup2(err[1], 2) < 0) goto failed;
    if (user[0]) {
      if (setgroups((size_t)who.ngroups, who.groups) < 0 || setgid(who.gid) < 0 ||
          setuid(who.uid) < 0)
        goto failed;
    }
    environ = env;
    execvp(argv[0], argv);
  failed:;
    int code = errno;
    if (write(failed[1], &code, sizeof code) < 0) {
    }
    _exit(127);
  }
  close(out[1]);
  close(err[1]);
  close(failed[1]);
  if (transfer) {
    close(in[0]);
    fcntl(in[1], F_SETFL, O_NONBLOCK);
  }
  int code;
  if (read(failed[0], &code, sizeof code) == (ssize_t)sizeof code) {
    waitpid(pid, NULL, 0);
    fall_back(sock, strerror(code)); /* nothing ran: the engine's exec says it its own way */
  }
  if (transfer && frame(sock, 's', NULL, 0) < 0) {
    kill(-pid, SIGKILL);
    _exit(0);
  }
  if (limit_ms > 0) { /* a timer: neither a silent command nor a stalled reader holds it */
    setpgid(pid, pid);
    limited = pid;
    struct sigaction on_time = {.sa_handler = on_limit, .sa_flags = SA_RESTART};
    sigaction(SIGALRM, &on_time, NULL);
    struct itimerval when = {{0, 0}, {limit_ms / 1000, (limit_ms % 1000) * 1000}};
    setitimer(ITIMER_REAL, &when, NULL);
  }

  static char chunk[FRAME_MAX], input[FRAME_MAX];
  size_t pending = 0, sent = 0; /* stdin read from the socket, not yet taken by the command */
  int stdin_open = transfer, socket_eof = 0;
  struct pollfd fds[5] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0},
                          {sigchld_pipe[0], POLLIN, 0}, {sock, POLLIN, 0}, {-1, POLLOUT, 0}};
  int status = 0, exited = 0, open_pipes = 2;
  long drain_until = 0;
  while (!exited || open_pipes > 0) { /* until it exited (its output closed or not) */
    int wait_ms = -1; /* the time limit is the timer's: its signal ends the poll */
    if (exited) {
      wait_ms = (int)(drain_until - now_ms());
      if (wait_ms <= 0) break;
    }
    /* In a transfer the socket is read only while the command has taken what came before
       (the command's stdin is held back, not this process's memory), and not after EOF. */
    fds[3].fd = stdin_open && pending > sent ? -1 : sock;
    fds[3].events = socket_eof ? 0 : POLLIN; /* after EOF: a reset (POLLHUP, POLLERR) only */
    fds[4].fd = stdin_open && pending > sent ? in[1] : -1;
    if (poll(fds, 5, wait_ms) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (int i = 0; i < 2; i++) {
      if (fds[i].fd < 0 || !fds[i].revents) continue;
      ssize_t n = read(fds[i].fd, chunk, sizeof chunk);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        close(fds[i].fd);
        fds[i].fd = -1;
        open_pipes--;
      } else if (frame(sock, i == 0 ? 'o' : 'e', chunk, (size_t)n) < 0) {
        kill(-pid, SIGKILL);
        _exit(0);
      }
    }
    if (fds[3].fd >= 0 && fds[3].revents) {
      if (!transfer || socket_eof) { /* the platform hung up or sent more: it is over */
        kill(-pid, SIGKILL);
        _exit(0);
      }
      ssize_t n = read(sock, input, sizeof input);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) { /* reset: the platform is gone */
        kill(-pid, SIGKILL);
        _exit(0);
      }
      if (n == 0) {
        socket_eof = 1;
        if (stdin_open) close(in[1]);
        stdin_open = 0;
      } else if (stdin_open) {
        pending = (size_t)n;
        sent = 0;
      } /* else: the command closed its stdin; the rest is read and dropped */
    }
    if (fds[4].fd >= 0 && fds[4].revents) {
      ssize_t n = write(in[1], input + sent, pending - sent);
      if (n > 0) {
        sent += (size_t)n;
      } else if (n < 0 && errno != EAGAIN && errno != EINTR) { /* EPIPE: it stopped reading */
        close(in[1]);
        stdin_open = 0;
      }
    }
    if (fds[2].revents) {
      char drained[64];
      while (read(sigchld_pipe[0], drained, sizeof drained) > 0) {
      }
      if (!exited && waitpid(pid, &status, WNOHANG) == pid) {
        exited = 1;
        drain_until = now_ms() + DRAIN_MS;
        fds[2].fd = -1;
      }
    }
  }
  int exit_code = WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
  char text[16];
  int n = snprintf(text, sizeof text, "%d", exit_code);
  frame(sock, 'x', text, (size_t)n);
  shutdown(sock, SHUT_WR);
  /* What the platform still sends is read until it closes (at most DRAIN_MS): a close with
     unread input would reset the connection and lose the exit frame on its way. */
  struct pollfd rest = {sock, POLLIN, 0};
  long until = now_ms() + DRAIN_MS;
  while (!socket_eof && poll(&rest, 1, (int)(until - now_ms() > 0 ? until - now_ms() : 0)) > 0 &&
         read(sock, input, sizeof input) > 0) {
  }
  _exit(0);
}

int main(int argc, char **argv) {
  if (argc > 1) { /* the token: kept here, wiped from the command line (/proc/N/cmdline) */
    snprintf(token, sizeof token, "%s", argv[1]);
    memset(argv[1], 0, strlen(argv[1]));
  }
  signal(SIGCHLD, SIG_IGN); /* connections' processes are reaped by the kernel */
  signal(SIGPIPE, SIG_IGN);
  int listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int on = 1;
  struct sockaddr_in address = {.sin_family = AF_INET, .sin_port = htons(TASKD_PORT),
                                .sin_addr = {htonl(INADDR_ANY)}};
  if (token[0] == '\0' || listener < 0 ||
      setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on) < 0 ||
      bind(listener, (struct sockaddr *)&address, sizeof address) < 0 || listen(listener, 64) < 0) {
    /* No server: the container still lives as `sleep infinity` would, and the platform's
       execs find nothing listening and go by the engine. */
    fprintf(stderr, "belvedir-taskd: not serving: %s\n", token[0] ? strerror(errno) : "no token");
    for (;;) pause();
  }
  for (;;) {
    int sock = accept4(listener, NULL, NULL, SOCK_CLOEXEC);
    if (sock < 0) {
      if (errno == EMFILE || errno == ENFILE || errno == ENOMEM) sleep(1);
      continue;
    }
    pid_t pid = fork();
    if (pid == 0) {
      close(listener);
      serve(sock);
    }
    close(sock);
    if (pid < 0) sleep(1);
  }
}
