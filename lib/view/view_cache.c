/* view_cache.c — the viewer's one cache: PNG tiles and shared objects (base grids,
 * sample tokens) under one byte budget, least recently used out first; an entry a
 * request still references is kept until it is released. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "view/view_internal.h"

static void entry_free(dfl__view_entry *e)
{
    if (e->drop) e->drop(e->obj);
    free(e->png);
    free(e);
}

/* Evict least-recently-used unreferenced entries until the budget holds. Lock held. */
static void cache_trim(dfl__view_cache *c)
{
    while (c->bytes > c->budget) {
        dfl__view_entry **victim = NULL;
        for (dfl__view_entry **p = &c->head; *p; p = &(*p)->next)
            if ((*p)->refs == 0 && (!victim || (*p)->used < (*victim)->used)) victim = p;
        if (!victim) break;
        dfl__view_entry *e = *victim;
        *victim = e->next;
        c->bytes -= e->bytes;
        c->entries--;
        entry_free(e);
    }
}

static dfl__view_entry *find_locked(dfl__view_cache *c, const char *key)
{
    for (dfl__view_entry *e = c->head; e; e = e->next)
        if (!strcmp(e->key, key)) return e;
    return NULL;
}

/* A copy of a cached PNG (caller frees), or NULL. */
unsigned char *dfl__view_cache_get_png(dfl__view_cache *c, const char *key, size_t *len)
{
    unsigned char *out = NULL;
    pthread_mutex_lock(&c->lock);
    dfl__view_entry *e = find_locked(c, key);
    if (e && e->png && (out = malloc(e->bytes))) {
        memcpy(out, e->png, e->bytes);
        *len = e->bytes;
        e->used = ++c->clock;
        c->hits++;
    } else {
        c->misses++;
    }
    pthread_mutex_unlock(&c->lock);
    return out;
}

void dfl__view_cache_put_png(dfl__view_cache *c, const char *key, const unsigned char *png, size_t len)
{
    dfl__view_entry *e = calloc(1, sizeof *e);
    if (!e || !(e->png = malloc(len))) {
        free(e);
        return; /* not caching is always allowed */
    }
    memcpy(e->png, png, len);
    e->bytes = len;
    snprintf(e->key, sizeof e->key, "%s", key);
    pthread_mutex_lock(&c->lock);
    if (find_locked(c, key)) {
        pthread_mutex_unlock(&c->lock);
        entry_free(e);
        return;
    }
    e->used = ++c->clock;
    e->next = c->head;
    c->head = e;
    c->bytes += len;
    c->entries++;
    cache_trim(c);
    pthread_mutex_unlock(&c->lock);
}

/* Take a reference to a cached object, or NULL. */
dfl__view_entry *dfl__view_cache_ref(dfl__view_cache *c, const char *key)
{
    pthread_mutex_lock(&c->lock);
    dfl__view_entry *e = find_locked(c, key);
    if (e && e->obj) {
        e->refs++;
        e->used = ++c->clock;
        c->hits++;
    } else {
        e = NULL;
        c->misses++;
    }
    pthread_mutex_unlock(&c->lock);
    return e;
}

/* Insert obj (bytes of memory) and return it referenced; on failure drop obj, NULL. */
dfl__view_entry *dfl__view_cache_put_obj(dfl__view_cache *c, const char *key, void *obj, size_t bytes,
                                         void (*drop)(void *))
{
    dfl__view_entry *e = calloc(1, sizeof *e);
    if (!e) {
        drop(obj);
        return NULL;
    }
    snprintf(e->key, sizeof e->key, "%s", key);
    e->obj = obj;
    e->drop = drop;
    e->bytes = bytes;
    e->refs = 1;
    pthread_mutex_lock(&c->lock);
    e->used = ++c->clock;
    e->next = c->head;
    c->head = e;
    c->bytes += bytes;
    c->entries++;
    cache_trim(c);
    pthread_mutex_unlock(&c->lock);
    return e;
}

/* Make key the next entry to go (when unreferenced): a preview once its full grid is in. */
void dfl__view_cache_age(dfl__view_cache *c, const char *key)
{
    pthread_mutex_lock(&c->lock);
    dfl__view_entry *e = find_locked(c, key);
    if (e) e->used = 0;
    pthread_mutex_unlock(&c->lock);
}

void dfl__view_cache_release(dfl__view_cache *c, dfl__view_entry *e)
{
    if (!e) return;
    pthread_mutex_lock(&c->lock);
    e->refs--;
    cache_trim(c);
    pthread_mutex_unlock(&c->lock);
}

void dfl__view_cache_clear(dfl__view_cache *c)
{
    for (dfl__view_entry *e = c->head, *n; e; e = n) {
        n = e->next;
        entry_free(e);
    }
    c->head = NULL;
    c->bytes = c->entries = 0;
}

void dfl_view_cache_stats(dfl_view *v, size_t *bytes, size_t *entries, uint64_t *hits, uint64_t *misses)
{
    pthread_mutex_lock(&v->c.lock);
    if (bytes) *bytes = v->c.bytes;
    if (entries) *entries = v->c.entries;
    if (hits) *hits = v->c.hits;
    if (misses) *misses = v->c.misses;
    pthread_mutex_unlock(&v->c.lock);
}
