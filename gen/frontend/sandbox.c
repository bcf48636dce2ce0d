/*
 * sandbox.c — the Lua environment a model script runs in.
 *
 * People build model scripts they downloaded, so a script is untrusted by default.
 * It gets what describing a model needs and nothing that reaches the machine:
 *   kept     the base library without dofile/loadfile, with a text-only load;
 *            string (no string.dump), table, math (seeded: builds repeat), utf8,
 *            coroutine; print, which writes to stderr (stdout is Kiln's);
 *            require of Lua files below the script's directory.
 *   removed  io, os, debug, package.loadlib and C modules, binary chunks (crafted
 *            bytecode can crash the VM), string.dump.
 *   limits   an instruction budget (a count hook) and a memory cap (the allocator),
 *            each ending the script with a one-line error.
 * kiln.load reads only below the script's directory (sandbox_check_read).
 * `--unsafe-lua` gives the full standard library and no limits, as before.
 * docs/lua-api.md ("The sandbox") is the user-facing statement of this list.
 */
#define _XOPEN_SOURCE 700   /* realpath */
#include "frontend.h"

#include <errno.h>
#include <limits.h>
#include <lualib.h>
#include <stdlib.h>
#include <string.h>

enum { HOOK_EVERY = 1000 };     /* VM instructions between two budget checks */

typedef struct {
  SandboxOptions o;
  size_t used;                  /* bytes the Lua state holds now */
  int64_t executed;             /* VM instructions run, to HOOK_EVERY */
  bool over_memory;             /* the allocator refused a block for the cap */
} Sandbox;

/* lua_Alloc with a cap: refuses (returns NULL, which Lua raises as a memory error) a
 * growth past o.max_memory bytes; frees and shrinks always succeed. */
static void *sb_alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
  Sandbox *sb = ud;
  size_t old = ptr ? osize : 0;
  if (nsize == 0) {
    free(ptr);
    sb->used -= old;
    return NULL;
  }
  if (sb->o.max_memory > 0 && nsize > old && sb->used - old + nsize > (size_t)sb->o.max_memory) {
    sb->over_memory = true;
    return NULL;
  }
  void *p = realloc(ptr, nsize);
  if (p) sb->used = sb->used - old + nsize;
  return p;
}

/* The count hook: raises a Lua error (so the message handler names the user's line)
 * once the script has run more than o.max_instructions VM instructions. */
static void sb_hook(lua_State *L, lua_Debug *ar) {
  (void)ar;
  void *ud;
  lua_getallocf(L, &ud);
  Sandbox *sb = ud;
  sb->executed += HOOK_EVERY;
  if (sb->o.max_instructions > 0 && sb->executed > sb->o.max_instructions)
    luaL_error(L, "%s", kiln_fmt("the model script ran more than %lld Lua instructions (raise the budget with "
                                 "--lua-max-instructions N, 0 = none)", (long long)sb->o.max_instructions));
}

/* print(...): tostring of each argument, tab-separated, to stderr. */
static int sb_print(lua_State *L) {
  int n = lua_gettop(L);
  for (int i = 1; i <= n; i++) {
    size_t len;
    const char *s = luaL_tolstring(L, i, &len);
    if (i > 1) fputc('\t', stderr);
    fwrite(s, 1, len, stderr);
    lua_pop(L, 1);
  }
  fputc('\n', stderr);
  return 0;
}

/* load(chunk [, name [, mode [, env]]]) with mode forced to "t": a binary chunk is
 * refused the way Lua refuses one whose mode excludes it. */
static int sb_load(lua_State *L) {
  lua_settop(L, 4);
  lua_pushliteral(L, "t");
  lua_replace(L, 3);
  lua_pushvalue(L, lua_upvalueindex(1));        /* the original load */
  lua_insert(L, 1);
  lua_call(L, 4, LUA_MULTRET);
  return lua_gettop(L);
}

/* realpath(p), or NULL (errno set) when p does not exist. Arena string. */
static char *real(const char *p) {
  char *r = realpath(p, NULL);
  if (!r) return NULL;
  char *s = kiln_strdup(r);
  free(r);
  return s;
}

/* Paths the user named on the command line (kiln.path's -D values): readable too. */
static const char **allowed;
static int nallowed;

/* Contract in frontend.h. */
void sandbox_allow(const char *real_path) {
  allowed = realloc(allowed, sizeof *allowed * (size_t)(nallowed + 1));
  if (!allowed) die("out of memory");
  allowed[nallowed++] = kiln_strdup(real_path);
}

/* Whether the resolved path p is r or lies below it. */
static bool below(const char *p, const char *r) {
  size_t n = strlen(r);
  return strcmp(r, "/") == 0 || (strncmp(p, r, n) == 0 && (p[n] == '/' || p[n] == 0));
}

/* Contract: true when path, once symbolic links and `..` are resolved, lies inside
 * the directory root (or is root) or below a path the user allowed (sandbox_allow),
 * or when it does not exist (the reader then reports that it cannot open it); false
 * with *why set otherwise. */
bool sandbox_inside(const char *root, const char *path, const char **why) {
  char *r = real(root[0] ? root : "."), *p = real(path);
  if (!p) return true;
  if (!r) die("sandbox: the script's directory %s does not resolve", root);
  if (below(p, r)) return true;
  for (int i = 0; i < nallowed; i++)
    if (below(p, allowed[i])) return true;
  *why = kiln_fmt("%s is outside the script's directory; the sandbox reads only files below it "
                  "(--unsafe-lua lifts this)", path);
  return false;
}

/* package.searchers[2] in the sandbox: module "a.b" is the file <root>/a/b.lua, loaded
 * as text, and only if it resolves inside root. Returns the loader and its file name,
 * or a message string (Lua's convention for "not found here"). */
static int sb_searcher(lua_State *L) {
  const char *name = luaL_checkstring(L, 1);
  Sandbox *sb;
  lua_getallocf(L, (void **)&sb);
  const char *root = sb->o.root[0] ? sb->o.root : ".";
  Buf rel = {0};
  for (const char *p = name; *p; p++) buf_put(&rel, *p == '.' ? "/" : p, 1);
  char *file = kiln_fmt("%s/%s.lua", root, rel.data ? rel.data : "");
  buf_free(&rel);
  if (name[0] == '.' || strstr(name, "..") || name[strlen(name) - 1] == '.' || strchr(name, '/'))
    return luaL_error(L, "module '%s': a module name is dot-separated words below the script's directory", name);
  const char *why;
  FILE *f = fopen(file, "r");
  if (!f) {
    lua_pushfstring(L, "\n\tno file '%s'", file);
    return 1;
  }
  fclose(f);
  if (!sandbox_inside(root, file, &why)) {
    lua_pushfstring(L, "\n\tno file '%s' (the sandbox loads modules only below the script's directory)", file);
    return 1;
  }
  if (luaL_loadfilex(L, file, "t") != LUA_OK)
    return luaL_error(L, "error loading module '%s' from file '%s':\n\t%s", name, file, lua_tostring(L, -1));
  lua_pushstring(L, file);
  return 2;
}

/* A function standing in for something the sandbox removed: calling it raises
 * "<what> is not available ..." (upvalue 1: what). */
static int sb_denied(lua_State *L) {
  return luaL_error(L, "%s is not available to a model script (Kiln's sandbox; --unsafe-lua lifts it, see "
                    "docs/lua-api.md)", lua_tostring(L, lua_upvalueindex(1)));
}

/* __index of a removed library's stand-in table: any field raises like sb_denied. */
static int sb_denied_index(lua_State *L) {
  const char *k = lua_type(L, 2) == LUA_TSTRING ? lua_tostring(L, 2) : "?";
  return luaL_error(L, "%s.%s is not available to a model script (Kiln's sandbox; --unsafe-lua lifts it, see "
                    "docs/lua-api.md)", lua_tostring(L, lua_upvalueindex(1)), k);
}

/* Sets field k of the table at the top of the stack to a sb_denied named what. */
static void deny_fn(lua_State *L, const char *k, const char *what) {
  lua_pushstring(L, what);
  lua_pushcclosure(L, sb_denied, 1);
  lua_setfield(L, -2, k);
}

/* Sets global lib to an empty table whose every field raises (os.execute: "os.execute
 * is not available ..."), so a script learns why rather than "index a nil value". */
static void deny_lib(lua_State *L, const char *lib) {
  lua_newtable(L);
  lua_newtable(L);
  lua_pushstring(L, lib);
  lua_pushcclosure(L, sb_denied_index, 1);
  lua_setfield(L, -2, "__index");
  lua_setmetatable(L, -2);
  lua_setglobal(L, lib);
}

/* Opens library `name` (luaL_requiref) and leaves it global. */
static void open_lib(lua_State *L, const char *name, lua_CFunction f) {
  luaL_requiref(L, name, f, 1);
  lua_pop(L, 1);
}

/* The safe libraries of the header comment, and package with only the preload and
 * the confined Lua searcher. */
static void open_safe(lua_State *L) {
  open_lib(L, LUA_GNAME, luaopen_base);
  open_lib(L, LUA_LOADLIBNAME, luaopen_package);
  open_lib(L, LUA_COLIBNAME, luaopen_coroutine);
  open_lib(L, LUA_TABLIBNAME, luaopen_table);
  open_lib(L, LUA_STRLIBNAME, luaopen_string);
  open_lib(L, LUA_MATHLIBNAME, luaopen_math);
  open_lib(L, LUA_UTF8LIBNAME, luaopen_utf8);

  lua_pushglobaltable(L);
  deny_fn(L, "dofile", "dofile");
  deny_fn(L, "loadfile", "loadfile");
  lua_getfield(L, -1, "load");
  lua_pushcclosure(L, sb_load, 1);
  lua_setfield(L, -2, "load");
  lua_pushcfunction(L, sb_print);
  lua_setfield(L, -2, "print");
  lua_pop(L, 1);

  lua_getglobal(L, "string");
  deny_fn(L, "dump", "string.dump");
  lua_pop(L, 1);
  deny_lib(L, "os");
  deny_lib(L, "io");
  deny_lib(L, "debug");

  lua_getglobal(L, "package");
  deny_fn(L, "loadlib", "package.loadlib");
  deny_fn(L, "searchpath", "package.searchpath");
  lua_pushliteral(L, "");
  lua_setfield(L, -2, "cpath");
  lua_pushliteral(L, "");
  lua_setfield(L, -2, "path");
  lua_getfield(L, -1, "searchers");
  lua_rawgeti(L, -1, 1);                         /* keep the preload searcher */
  lua_createtable(L, 2, 0);
  lua_insert(L, -2);
  lua_rawseti(L, -2, 1);
  lua_pushcfunction(L, sb_searcher);
  lua_rawseti(L, -2, 2);
  lua_setfield(L, -3, "searchers");
  lua_pop(L, 2);
}

/* Run before a script in --unsafe-lua mode. The full standard library, but three
 * things would break Kiln's own promises: stdout belongs to `kiln graph` and `kiln
 * run` (print and io.stdout go to stderr); os.exit would end the process with no
 * message and leave a half-built output (it raises an error instead). */
static const char unsafe_prelude[] =
    "print = function(...) local t = table.pack(...) "
    "for i = 1, t.n do t[i] = tostring(t[i]) end "
    "io.stderr:write(table.concat(t, '\\t', 1, t.n), '\\n') end\n"
    "io.stdout = io.stderr\n"
    "io.output(io.stderr)\n"
    "os.exit = function() error('os.exit is not available in a model script (raise an error with error(), "
    "or just return)', 2) end\n";

/* Contract: a new Lua state for a model script under o (see the header comment), with
 * math.random seeded to 0 so two builds trace the same graph. Never NULL. */
lua_State *sandbox_open(const SandboxOptions *o) {
  Sandbox *sb = kiln_alloc(sizeof *sb);
  sb->o = *o;
  if (o->unsafe) sb->o.max_memory = sb->o.max_instructions = 0;
  lua_State *L = lua_newstate(sb_alloc, sb);
  if (!L) kiln_error("cannot create a Lua state (out of memory)");
  if (o->unsafe) {
    luaL_openlibs(L);
    if (luaL_loadbufferx(L, unsafe_prelude, strlen(unsafe_prelude), "=[kiln] prelude", "t") != LUA_OK ||
        lua_pcall(L, 0, 0, 0) != LUA_OK)
      die("%s", lua_tostring(L, -1));
    lua_getglobal(L, "package");               /* scripts may require helpers beside them */
    lua_pushfstring(L, "%s/?.lua;", o->root[0] ? o->root : ".");
    lua_getfield(L, -2, "path");
    lua_concat(L, 2);
    lua_setfield(L, -2, "path");
    lua_pop(L, 1);
  } else {
    open_safe(L);
  }
  lua_getglobal(L, "math");
  lua_getfield(L, -1, "randomseed");
  lua_pushinteger(L, 0);
  lua_call(L, 1, 0);
  lua_pop(L, 1);
  if (sb->o.max_instructions > 0) lua_sethook(L, sb_hook, LUA_MASKCOUNT, HOOK_EVERY);
  return L;
}

/* Contract: the one-line message for a memory error of L's script when the cap (not
 * the machine) refused the memory, else NULL. */
const char *sandbox_memory_message(lua_State *L) {
  Sandbox *sb;
  lua_getallocf(L, (void **)&sb);
  if (!sb->over_memory) return NULL;
  return kiln_fmt("the model script used more than its %lld MiB of Lua memory (raise the cap with "
                  "--lua-max-memory MIB, 0 = none)", (long long)(sb->o.max_memory >> 20));
}

/* Contract: whether L runs in the sandbox (not --unsafe-lua). */
bool sandbox_active(lua_State *L) {
  Sandbox *sb;
  lua_getallocf(L, (void **)&sb);
  return !sb->o.unsafe;
}
