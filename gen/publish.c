/*
 * publish.c — how `kiln build` puts a finished build into its output directory.
 *
 * Readers (an app's build, a CI job, a second `kiln build`) must never see half of
 * one build and half of another, and a build that fails or is interrupted must
 * leave the previous output as it was. So:
 *  - exclusive: builds into the same output directory take turns (an flock on the
 *    directory that contains it; a second build waits);
 *  - staged: every file is written into a fresh sibling directory
 *    <out>.kiln-tmp-XXXXXX (mkdtemp), which an error, SIGINT, SIGTERM or SIGHUP
 *    removes; leftovers of a build killed outright (SIGKILL) are removed by the next
 *    build into the same directory, which holds the lock, so none can be live;
 *  - one swap: the staged directory replaces <out> in one rename — an atomic
 *    exchange where the system has one (Linux renameat2 RENAME_EXCHANGE, macOS
 *    renamex_np RENAME_SWAP), else rename <out> aside and the new one in, leaving a
 *    moment with no <out> but never a mixed one;
 *  - ownership: Kiln owns the files of the model it builds (<m>.h, <m>.c,
 *    <m>.weights, <m>.json, <m>.tok, <m>.metal, <m>_metal.h, <m>_metal.c, <m>_weights.c,
 *    <m>.mlpackage/); what the new build does not write is gone afterwards (no
 *    stale .metal beside a new header). Other files in <out> are carried into the
 *    new directory as hard links (copies where links fail), so they survive. A
 *    directory holding another model's Kiln outputs is refused: one model per
 *    output directory.
 * docs/output.md ("Publishing") states this for users.
 */
#define _GNU_SOURCE     /* renameat2 */
#include "kiln.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* The staging directory the signal handler removes: set before it exists, read only
 * by the handler, cleared once published. */
static char staged[4096];
static volatile sig_atomic_t staging;

/* SIGINT/SIGTERM/SIGHUP during a build: remove the staging directory, then die of
 * the same signal (the caller sees an interrupted process, not a failed one). */
static void on_signal(int sig) {
  if (staging) kiln_remove_tree(staged);
  signal(sig, SIG_DFL);
  raise(sig);
}

/* Writes s to stderr from a signal handler. */
static void say(const char *s) {
  ssize_t r = write(2, s, strlen(s));
  (void)r;
}

/* SIGBUS: a read of a mapped weights file past its end, which happens when the file
 * shrank after kiln.load checked it. A one-line error instead of a crash, and no
 * half-written output. */
static void on_bus_error(int sig) {
  (void)sig;
  say("kiln: error: bus error reading the mapped weights file");
  for (int i = 0; i < kiln_mapped_count(); i++) say(i ? ", " : " "), say(kiln_mapped_name(i));
  say(": it changed or shrank while kiln read it; nothing was written\n");
  if (staging) kiln_remove_tree(staged);
  _exit(1);
}

/* Contract in kiln.h. */
void publish_catch_bus_errors(void) {
  struct sigaction sa = {0};
  sa.sa_handler = on_bus_error;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGBUS, &sa, NULL);
}

static const int caught[] = {SIGINT, SIGTERM, SIGHUP};

static void handle_signals(bool on) {
  for (size_t i = 0; i < sizeof caught / sizeof caught[0]; i++) {
    struct sigaction sa = {0};
    sa.sa_handler = on ? on_signal : SIG_DFL;
    sigemptyset(&sa.sa_mask);
    sigaction(caught[i], &sa, NULL);
  }
}

/* "dir" and "base" of path ("a/b/out" -> "a/b", "out"; "out" -> ".", "out"). Arena strings. */
static void split_path(const char *path, char **dir, char **base) {
  char *p = kiln_strdup(path);
  size_t n = strlen(p);
  while (n > 1 && p[n - 1] == '/') p[--n] = 0;   /* "out/" names out */
  char *slash = strrchr(p, '/');
  if (!slash) {
    *dir = ".";
    *base = p;
  } else {
    *base = slash + 1;
    *dir = slash == p ? "/" : kiln_fmt("%.*s", (int)(slash - p), p);
  }
}

/* The files of a model a build owns (the list in the header comment); `kiln import`
 * owns others (publish_set_owned). */
static const char *const build_suffixes[] = {".h", ".c", ".weights", ".json", ".tok", ".metal", "_metal.h", "_metal.c",
                                             "_weights.c", ".mlpackage", NULL};

/* Whether file name e is one of model m's outputs, <m><suffix> for a suffix listed. */
static bool owned(const char *e, const char *m, const char *const *suffixes) {
  size_t n = strlen(m);
  if (strncmp(e, m, n) != 0) return false;
  for (int i = 0; suffixes[i]; i++)
    if (strcmp(e + n, suffixes[i]) == 0) return true;
  return false;
}

/* The model whose Kiln outputs dir/<x>.json is (it starts with {"model": "<x>" and
 * <x>.h lies beside it), or NULL. */
static const char *kiln_output_model(const char *dir, const char *entry) {
  size_t n = strlen(entry);
  if (n <= 5 || strcmp(entry + n - 5, ".json") != 0) return NULL;
  char *m = kiln_fmt("%.*s", (int)(n - 5), entry);
  FILE *f = fopen(kiln_fmt("%s/%s", dir, entry), "r");
  if (!f) return NULL;
  char head[512] = {0};
  size_t got = fread(head, 1, sizeof head - 1, f);
  fclose(f);
  head[got] = 0;
  if (!strstr(head, kiln_fmt("\"model\": \"%s\"", m)) || strncmp(head, "{\n  \"model\": ", 13) != 0) return NULL;
  struct stat st;
  return stat(kiln_fmt("%s/%s.h", dir, m), &st) == 0 ? m : NULL;
}

/* Copies regular file from to to (used where a hard link is not possible). */
static void copy_file(const char *from, const char *to, mode_t mode) {
  FILE *in = fopen(from, "rb");
  int fd = open(to, O_WRONLY | O_CREAT | O_EXCL, mode & 07777);
  FILE *out = fd >= 0 ? fdopen(fd, "wb") : NULL;
  if (!in || !out) kiln_error("cannot carry %s into the new output: %s", from, strerror(errno));
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, in)) > 0)
    if (fwrite(buf, 1, n, out) != n) kiln_error("cannot write %s: %s", to, strerror(errno));
  if (ferror(in) || fclose(out) != 0) kiln_error("cannot carry %s into the new output", from);
  fclose(in);
}

/* Recreates entry `from` (a file, link or directory tree the user keeps in the output
 * directory) at `to`: files as hard links, symbolic links as links, directories entry
 * by entry; anything else (fifos, sockets) is left behind with a warning. */
static void carry(const char *from, const char *to) {
  struct stat st;
  if (lstat(from, &st) != 0) kiln_error("cannot read %s: %s", from, strerror(errno));
  if (S_ISREG(st.st_mode)) {
    if (link(from, to) != 0) copy_file(from, to, st.st_mode);
  } else if (S_ISLNK(st.st_mode)) {
    char target[4096];
    ssize_t n = readlink(from, target, sizeof target - 1);
    if (n < 0) kiln_error("cannot read the link %s: %s", from, strerror(errno));
    target[n] = 0;
    if (symlink(target, to) != 0) kiln_error("cannot recreate the link %s: %s", to, strerror(errno));
  } else if (S_ISDIR(st.st_mode)) {
    if (mkdir(to, st.st_mode & 07777) != 0) kiln_error("cannot create %s: %s", to, strerror(errno));
    DIR *d = opendir(from);
    if (!d) kiln_error("cannot read %s: %s", from, strerror(errno));
    for (struct dirent *e; (e = readdir(d));)
      if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
        carry(kiln_fmt("%s/%s", from, e->d_name), kiln_fmt("%s/%s", to, e->d_name));
    closedir(d);
  } else {
    fprintf(stderr, "kiln: warning: %s is not a file, link or directory; not kept in the new output\n", from);
  }
}

/* Exchanges the directory entries a and b in one step where the system can; returns
 * false (errno set) where it cannot, so the caller falls back to two renames. */
static bool exchange(const char *a, const char *b) {
#if defined(__linux__) && defined(RENAME_EXCHANGE)
  return renameat2(AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE) == 0;
#elif defined(__APPLE__) && defined(RENAME_SWAP)
  return renamex_np(a, b, RENAME_SWAP) == 0;
#else
  (void)a, (void)b;
  errno = ENOSYS;
  return false;
#endif
}

/* Contract: creates dir and its missing parents, like mkdir -p; a failure is a user
 * error naming the directory. */
void kiln_mkdir_p(const char *dir) {
  char *p = kiln_strdup(dir);
  for (char *q = p + 1; *q; q++) {
    if (*q != '/') continue;
    *q = 0;
    if (mkdir(p, 0777) != 0 && errno != EEXIST) kiln_error("cannot create %s: %s", p, strerror(errno));
    *q = '/';
  }
  if (mkdir(p, 0777) != 0 && errno != EEXIST) kiln_error("cannot create %s: %s", p, strerror(errno));
}

struct Publish {
  const char *out, *model, *dir, *base, *tmp;
  const char *const *suffixes;       /* the model's files this publish owns */
  int lockfd;
};

/* Removes <base>.kiln-tmp-* and <base>.kiln-old-* in dir: left by builds that were
 * killed outright. Only called with the lock held, so none belongs to a live build. */
static void remove_leftovers(const char *dir, const char *base) {
  DIR *d = opendir(dir);
  if (!d) kiln_error("cannot read %s: %s", dir, strerror(errno));
  char *tmp = kiln_fmt("%s.kiln-tmp-", base), *old = kiln_fmt("%s.kiln-old-", base);
  for (struct dirent *e; (e = readdir(d));)
    if (strncmp(e->d_name, tmp, strlen(tmp)) == 0 || strncmp(e->d_name, old, strlen(old)) == 0)
      kiln_remove_tree(kiln_fmt("%s/%s", dir, e->d_name));
  closedir(d);
}

/* Contract: takes the output lock (waiting for a build into the same directory to
 * finish), refuses an output directory that holds another model's Kiln outputs or is
 * not a directory, and creates the empty staging directory that the emitters write
 * into (returned in p->tmp); an error or a signal from here on removes it. */
Publish *publish_begin(const char *outdir, const char *model) {
  Publish *p = kiln_alloc(sizeof *p);
  p->out = outdir;
  p->model = model;
  p->suffixes = build_suffixes;
  split_path(outdir, (char **)&p->dir, (char **)&p->base);
  if (strcmp(p->base, ".") == 0 || strcmp(p->base, "..") == 0 || strcmp(p->base, "/") == 0)
    kiln_error("build: -o %s: name a directory of its own (Kiln replaces it as a whole)", outdir);
  kiln_mkdir_p(p->dir);
  struct stat st;
  if (stat(p->dir, &st) != 0 || !S_ISDIR(st.st_mode))
    kiln_error("cannot create %s: %s is not a directory", outdir, p->dir);
  p->lockfd = open(p->dir, O_RDONLY | O_DIRECTORY);
  if (p->lockfd < 0) kiln_error("cannot open %s: %s", p->dir, strerror(errno));
  if (flock(p->lockfd, LOCK_EX | LOCK_NB) != 0) {
    fprintf(stderr, "kiln: waiting for another build into %s to finish\n", p->dir);
    if (flock(p->lockfd, LOCK_EX) != 0) kiln_error("cannot lock %s: %s", p->dir, strerror(errno));
  }
  remove_leftovers(p->dir, p->base);
  if (stat(outdir, &st) == 0) {
    if (!S_ISDIR(st.st_mode)) kiln_error("build: %s exists and is not a directory", outdir);
    DIR *d = opendir(outdir);
    if (!d) kiln_error("cannot read %s: %s", outdir, strerror(errno));
    for (struct dirent *e; (e = readdir(d));) {
      const char *other = kiln_output_model(outdir, e->d_name);
      if (other && strcmp(other, model) != 0)
        kiln_error("build: %s holds the Kiln outputs of model '%s' (%s); build '%s' into a directory of its own",
                   outdir, other, e->d_name, model);
    }
    closedir(d);
  }
  char *tmpl = kiln_fmt("%s/%s.kiln-tmp-XXXXXX", p->dir, p->base);
  if (strlen(tmpl) >= sizeof staged) kiln_error("build: output path too long: %s", outdir);
  handle_signals(true);
  if (!mkdtemp(tmpl)) kiln_error("cannot create %s: %s", tmpl, strerror(errno));
  memcpy(staged, tmpl, strlen(tmpl) + 1);
  staging = 1;
  p->tmp = tmpl;
  kiln_set_cleanup_dir(p->tmp);
  return p;
}

/* Makes the publish own <model><suffix> for the NULL-terminated suffixes instead of a
 * build's files: `kiln import` writes <m>.lua and <m>.safetensors, and replaces only those
 * (a C build of the same model beside them survives). */
void publish_set_owned(Publish *p, const char *const *suffixes) { p->suffixes = suffixes; }

/* The staging directory the emitters write into. */
const char *publish_staging(const Publish *p) { return p->tmp; }

/* Contract: moves the finished staging directory into place as described in the
 * header comment (the user's other files carried over, Kiln's stale ones dropped),
 * removes the previous output and releases the lock. */
void publish_commit(Publish *p) {
  struct stat st;
  bool exists = stat(p->out, &st) == 0;
  mode_t mode = exists ? st.st_mode & 07777 : 0;
  if (!exists) {
    mode_t mask = umask(0);
    umask(mask);
    mode = 0777 & ~mask;
  }
  if (chmod(p->tmp, mode) != 0) kiln_error("cannot set the mode of %s: %s", p->tmp, strerror(errno));
  if (exists) {
    DIR *d = opendir(p->out);
    if (!d) kiln_error("cannot read %s: %s", p->out, strerror(errno));
    for (struct dirent *e; (e = readdir(d));)
      if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0 && !owned(e->d_name, p->model, p->suffixes))
        carry(kiln_fmt("%s/%s", p->out, e->d_name), kiln_fmt("%s/%s", p->tmp, e->d_name));
    closedir(d);
  }
  const char *delay = getenv("KILN_TEST_PUBLISH_DELAY_MS");   /* tests only: widen the window before the swap */
  if (delay) nanosleep(&(struct timespec){atoi(delay) / 1000, (long)(atoi(delay) % 1000) * 1000000}, NULL);
  if (!exists) {
    if (rename(p->tmp, p->out) != 0) kiln_error("cannot move %s to %s: %s", p->tmp, p->out, strerror(errno));
  } else if (exchange(p->tmp, p->out)) {
    /* p->tmp now holds the previous output */
  } else {
    char *old = kiln_fmt("%s/%s.kiln-old-%ld", p->dir, p->base, (long)getpid());
    if (rename(p->out, old) != 0) kiln_error("cannot move %s aside: %s", p->out, strerror(errno));
    if (rename(p->tmp, p->out) != 0) {
      rename(old, p->out);
      kiln_error("cannot move %s to %s: %s", p->tmp, p->out, strerror(errno));
    }
    p->tmp = old;
    memcpy(staged, old, strlen(old) + 1);
  }
  kiln_set_cleanup_dir(NULL);
  if (exists && !kiln_remove_tree(p->tmp)) fprintf(stderr, "kiln: warning: could not remove %s\n", p->tmp);
  staging = 0;
  handle_signals(false);
  close(p->lockfd);
}
