/*
 * lua_config.c — what configures a script at build time: options given on the command
 * line (`kiln build m.lua -D checkpoint=ckpt -D max_context=4096`, read in the script
 * with kiln.option) and JSON files next to it (kiln.json: a Hugging Face config.json,
 * a sharded checkpoint's model.safetensors.index.json).
 *
 * kiln.path is kiln.option for a file or directory: the user's path, resolved where
 * they typed it and made readable through the sandbox (they named it themselves).
 *
 * An option the command line gives but the script never asks for is an error after the
 * script ran (a misspelt -D would otherwise be silently ignored); so is an option the
 * script requires (no default) that the command line does not give.
 */
#define _XOPEN_SOURCE 700   /* realpath */
#include "frontend.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct {
  const char *name, *value;     /* -D name=value */
  bool asked;                   /* some kiln.option read it */
} Define;

typedef struct {
  Define *d;
  int n;
  const char *script_dir;
} Config;

static Config *config_of(lua_State *L) { return lua_touserdata(L, lua_upvalueindex(1)); }

static Config *registered(lua_State *L) {
  lua_getfield(L, LUA_REGISTRYINDEX, "kiln.config");
  Config *c = lua_touserdata(L, -1);
  lua_pop(L, 1);
  return c;
}

/* The value of the last -D name (as with cc, the last one wins), every -D of that name
 * marked as asked for; NULL when the command line does not give it. */
static const char *find_define(Config *c, const char *name) {
  const char *v = NULL;
  for (int i = 0; i < c->n; i++)
    if (strcmp(c->d[i].name, name) == 0) {
      c->d[i].asked = true;
      v = c->d[i].value;
    }
  return v;
}

/* The value of -D name as the type of the default at index 3 (or a string when there
 * is no default): a number must parse whole, a boolean is true/false/1/0. */
static void push_typed(lua_State *L, const char *name, const char *value) {
  int t = lua_type(L, 3);
  if (t == LUA_TNUMBER) {
    char *end;
    errno = 0;
    if (lua_isinteger(L, 3)) {
      long long v = strtoll(value, &end, 10);
      if (!*value || *end || errno) fe_error(L, "kiln.option: -D %s=%s: an integer is expected (the default is %lld)", name,
                                             esc_message(value), (long long)lua_tointeger(L, 3));
      lua_pushinteger(L, v);
    } else {
      double v = strtod(value, &end);
      if (!*value || *end || errno) fe_error(L, "kiln.option: -D %s=%s: a number is expected", name, esc_message(value));
      lua_pushnumber(L, v);
    }
  } else if (t == LUA_TBOOLEAN) {
    bool yes = strcmp(value, "true") == 0 || strcmp(value, "1") == 0;
    if (!yes && strcmp(value, "false") != 0 && strcmp(value, "0") != 0)
      fe_error(L, "kiln.option: -D %s=%s: true, false, 1 or 0 is expected", name, esc_message(value));
    lua_pushboolean(L, yes);
  } else {
    lua_pushstring(L, value);
  }
}

/* kiln.option(name [, default]) -> the -D value (typed as the default), or the default;
 * with no default the option is required. */
static int l_option(lua_State *L) {
  Config *c = config_of(L);
  const char *name = luaL_checkstring(L, 1);
  if (!fe_is_c_identifier(name)) return fe_error(L, "kiln.option: option names are identifiers, not '%s'", esc_message(name));
  int t = lua_type(L, 2);
  if (t != LUA_TNONE && t != LUA_TNIL && t != LUA_TNUMBER && t != LUA_TBOOLEAN && t != LUA_TSTRING)
    return fe_error(L, "kiln.option: the default of %s must be a number, boolean or string, got %s", name, luaL_typename(L, 2));
  lua_settop(L, 2);
  lua_pushvalue(L, 2);                   /* index 3: the default, whose type the value takes */
  const char *v = find_define(c, name);
  if (v) {
    push_typed(L, name, v);
    return 1;
  }
  if (t == LUA_TNONE || t == LUA_TNIL)
    return fe_error(L, "option %s is required: give it with -D %s=VALUE", name, name);
  lua_pushvalue(L, 2);
  return 1;
}

/* kiln.path(name [, default]) -> a file or directory the user names with -D name=PATH:
 * resolved against the directory kiln runs in (where the user typed it) to an absolute
 * path, which kiln.load and kiln.json may then read even outside the script's
 * directory. The default, used without -D, is relative to the script like any path. */
static int l_path(lua_State *L) {
  Config *c = config_of(L);
  const char *name = luaL_checkstring(L, 1);
  if (!fe_is_c_identifier(name)) return fe_error(L, "kiln.path: option names are identifiers, not '%s'", esc_message(name));
  if (!lua_isnoneornil(L, 2) && lua_type(L, 2) != LUA_TSTRING)
    return fe_error(L, "kiln.path: the default of %s must be a string, got %s", name, luaL_typename(L, 2));
  const char *v = find_define(c, name);
  if (v) {
    char *r = realpath(v, NULL);
    if (!r) return fe_error(L, "-D %s=%s: %s", name, esc_message(v), strerror(errno));
    const char *abs = kiln_strdup(r);
    free(r);
    sandbox_allow(abs);
    lua_pushstring(L, abs);
    return 1;
  }
  if (lua_isnoneornil(L, 2)) return fe_error(L, "option %s is required: give it with -D %s=PATH", name, name);
  lua_pushvalue(L, 2);
  return 1;
}

/* A parsed JSON value as a Lua value: objects as tables, arrays as sequences, null as
 * kiln.null (a sentinel, so that a null field is not mistaken for an absent one). */
static void push_json(lua_State *L, const JVal *v) {
  luaL_checkstack(L, 4, "kiln.json: nested too deeply");
  switch (v->t) {
  case J_NULL: lua_getfield(L, lua_upvalueindex(2), "null"); break;
  case J_BOOL: lua_pushboolean(L, v->b); break;
  case J_STR: lua_pushlstring(L, v->text, v->len); break;
  case J_NUM: {
    int64_t u;
    if (json_uint(v, &u)) lua_pushinteger(L, u);
    else if (v->text[0] == '-' && !strpbrk(v->text, ".eE") && v->len < 17) lua_pushinteger(L, strtoll(v->text, NULL, 10));
    else lua_pushnumber(L, strtod(v->text, NULL));
    break;
  }
  case J_ARR:
    lua_createtable(L, v->n, 0);
    for (int i = 0; i < v->n; i++) {
      push_json(L, &v->items[i]);
      lua_rawseti(L, -2, i + 1);
    }
    break;
  case J_OBJ:
    lua_createtable(L, 0, v->n);
    for (int i = 0; i < v->n; i++) {
      lua_pushlstring(L, v->keys[i], v->keylens[i]);
      push_json(L, &v->items[i]);
      lua_rawset(L, -3);
    }
    break;
  }
}

/* The path argument 1 of fn resolved against the script's directory, checked against
 * the sandbox's bounds (a Lua error naming fn otherwise). */
static const char *readable_path(lua_State *L, Config *c, const char *fn) {
  const char *path = luaL_checkstring(L, 1);
  const char *full = path[0] == '/' || !c->script_dir[0] ? path : kiln_fmt("%s/%s", c->script_dir, path);
  const char *why;
  if (sandbox_active(L) && !sandbox_inside(c->script_dir, full, &why)) fe_error(L, "%s: %s", fn, why);
  return full;
}

/* kiln.json(path) -> the file's JSON value; path relative to the script's directory,
 * read within the sandbox's bounds like kiln.load. */
static int l_json(lua_State *L) {
  const char *full = readable_path(L, config_of(L), "kiln.json");
  char err[1024];
  size_t size;
  unsigned char *text = kiln_read_bounded(full, (size_t)64 << 20, &size, err, sizeof err);
  if (!text) return fe_error(L, "%s", err);
  JVal v;
  char *jerr = NULL;
  if (!json_parse(text, size, &v, &jerr)) return fe_error(L, "%s: %s", full, jerr);
  push_json(L, &v);
  return 1;
}

/* kiln.exists(path) -> whether the file or directory exists (relative to the script's
 * directory; within the sandbox's bounds): a script choosing between a sharded and a
 * single-file checkpoint. */
static int l_exists(lua_State *L) {
  const char *full = readable_path(L, config_of(L), "kiln.exists");
  struct stat st;
  lua_pushboolean(L, stat(full, &st) == 0);
  return 1;
}

/* Contract in frontend.h. */
void fe_register_config(lua_State *L, const char *const *defines, int ndefines, const char *script_dir) {
  Config *c = kiln_alloc(sizeof *c);                /* outlives the Lua state: fe_check_config */
  c->d = kiln_alloc(sizeof(Define) * (size_t)(ndefines + 1));
  c->script_dir = script_dir;
  for (int i = 0; i < ndefines; i++) {
    const char *eq = strchr(defines[i], '=');
    if (!eq || eq == defines[i]) kiln_error("-D %s: NAME=VALUE is expected", esc_message(defines[i]));
    c->d[c->n++] = (Define){kiln_fmt("%.*s", (int)(eq - defines[i]), defines[i]), eq + 1, false};
  }
  lua_newtable(L);                                  /* kiln.null: JSON's null */
  lua_setfield(L, -2, "null");
  lua_pushlightuserdata(L, c);
  lua_setfield(L, LUA_REGISTRYINDEX, "kiln.config");
  lua_pushlightuserdata(L, c);
  lua_pushvalue(L, -2);                             /* the kiln table: kiln.null for push_json */
  luaL_setfuncs(L, (const luaL_Reg[]){{"option", l_option}, {"path", l_path}, {"json", l_json}, {"exists", l_exists}, {NULL, NULL}}, 2);
}

/* Contract in frontend.h. */
void fe_check_config(lua_State *L, const char *script_file) {
  Config *c = registered(L);
  for (int i = 0; c && i < c->n; i++)
    if (!c->d[i].asked)
      kiln_error_at((SrcLoc){script_file, 0}, "-D %s: the script asks for no option '%s' (kiln.option)", c->d[i].name,
                    c->d[i].name);
}
