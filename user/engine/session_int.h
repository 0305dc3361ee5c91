/* SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause */
/*
 * The session's own functions, shared by its parts and by no other module:
 * session.c (targets, their events and phases, the tracer's callback),
 * session_devices.c (accelerator runtimes' events and probes),
 * session_sites.c (allocation sites and heap probes), session_sample.c
 * (each target's levels at a sample).
 */
#ifndef MEMTRAIL_SESSION_INT_H
#define MEMTRAIL_SESSION_INT_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "session.h"

/* Levels from CELL, TT's open phase's, into tt->current/peak; a sample when they moved. */
void session_refresh_from(struct session *s, struct trail_target *tt,
			  const struct memtrail_cell *cell, uint64_t t_ms, bool always);
/* E into the trail's event list where the session keeps one; taken either way. */
void session_add_event(struct session *s, json_t *e);
/* Whether new probes are made: not once asked to stop. */
bool session_probing(void);
/* A target's libraries changed, or may have: allocators to probe, code to name. */
void session_rescan(struct session *s, uint32_t pid);
/* TT ended: its phases closed (up to LAST_PHASE where known), levels final, hooks told. */
void session_end_target(struct session *s, struct trail_target *tt, uint64_t t_ms,
			const uint32_t *last_phase);
/* A device call failed: an event, a warning at a device OOM (session_devices.c). */
void session_on_device_fail(struct session *s, const struct memtrail_event_device *e);
/* The size of a device a target uses, as its runtime told it. */
void session_on_device_total(struct session *s, const struct memtrail_event_device_total *e);
/* The dynamic linker changed a target's libraries; FRESH: it mapped files new to memtrail. */
void session_on_libs(struct session *s, const struct memtrail_event_libs *e, bool fresh);

#endif
