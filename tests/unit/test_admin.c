/*
 * Unit tests for daemon/requests/admin.c: permission checks (with and without a
 * policy), the drain and shutdown hooks, kill, and refusals that keep the
 * connection open. Sessions run over a socketpair with no device; the
 * integration suite test_rudactl covers the views against a real rudad.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.h"

#include "requests/admin.h"
#include "common/config.h"
#include "common/policy.h"
#include "requests/session.h"
#include "server/connection.h"

struct fixture {
	uv_loop_t loop;
	struct ruda_session_context ctx;
	struct ruda_session *s;
	int peer; /* the client's end */
	int drains, shutdowns;
	struct ruda_config config;
	struct ruda_policy policy;
};

static void on_drain(void *data)
{
	((struct fixture *)data)->drains++;
}

static void on_shutdown(void *data)
{
	((struct fixture *)data)->shutdowns++;
}

/* A session of `uid` over a socketpair, with the hooks installed. */
static struct ruda_session *add_session(struct fixture *f, uint64_t id, uid_t uid, int *peer)
{
	int sv[2];
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv), 0);
	struct ruda_session *s;
	ck_assert_int_eq(ruda__connection_create(&f->ctx, sv[0], id, &s), 0);
	s->state = RUDA_SESSION_READY;
	s->uid = uid;
	snprintf(s->name, sizeof(s->name), "session-%llu", (unsigned long long)id);
	*peer = sv[1];
	return s;
}

static void fixture_init(struct fixture *f, uid_t uid)
{
	memset(f, 0, sizeof(*f));
	ck_assert_int_eq(uv_loop_init(&f->loop), 0);
	f->ctx.loop = &f->loop;
	f->ctx.arena_size = 1 << 20;
	f->ctx.max_output = 1 << 20;
	f->ctx.max_handles = 16;
	f->ctx.drain = on_drain;
	f->ctx.shutdown = on_shutdown;
	f->ctx.hook_data = f;
	ruda__handle_table_init(&f->ctx.sessions);
	f->s = add_session(f, 1, uid, &f->peer);
}

static void fixture_finish(struct fixture *f)
{
	ruda__connection_tick(&f->ctx);
	struct ruda_session *s;
	while ((s = ruda__handle_table_pop(&f->ctx.sessions, NULL)))
		ruda__connection_end(s);
	ruda__handle_table_finish(&f->ctx.sessions);
	ruda__connection_context_finish(&f->ctx);
	uv_run(&f->loop, UV_RUN_NOWAIT);
	ck_assert_int_eq(uv_loop_close(&f->loop), 0);
	close(f->peer);
	if (f->ctx.policy)
		ruda__config_finish(&f->config);
}

/* Run one admin request and return its reply (caller frees). */
static Ruda__Reply *admin(struct fixture *f, Ruda__Admin *a)
{
	static uint64_t id = 100;
	Ruda__Request req = RUDA__REQUEST__INIT;
	req.id = ++id;
	req.body_case = RUDA__REQUEST__BODY_ADMIN;
	req.admin = a;
	ruda__admin_handle(f->s, &req);
	Ruda__Reply *reply = raw_recv_reply(f->peer, 2000, NULL);
	ck_assert_ptr_nonnull(reply);
	ck_assert_uint_eq(reply->id, id);
	return reply;
}

#define ADMIN(field, type, init, body)                                                         \
	({                                                                                     \
		type m = init;                                                                 \
		Ruda__Admin a = RUDA__ADMIN__INIT;                                             \
		a.body_case = body;                                                            \
		a.field = &m;                                                                  \
		admin(&f, &a);                                                                 \
	})

START_TEST(drain_and_shutdown_call_the_hooks)
{
	struct fixture f;
	fixture_init(&f, 0);
	Ruda__Reply *r = ADMIN(drain, Ruda__AdminDrain, RUDA__ADMIN_DRAIN__INIT,
			       RUDA__ADMIN__BODY_DRAIN);
	ck_assert_int_eq(r->status, RUDA__STATUS__OK);
	ck_assert_int_eq(r->body_case, RUDA__REPLY__BODY_ADMIN);
	ck_assert_int_eq(r->admin->body_case, RUDA__ADMIN_REPLY__BODY_DRAIN);
	ck_assert_uint_eq(r->admin->drain->sessions, 1);
	ck_assert_int_eq(f.drains, 1);
	ck_assert_int_eq(f.ctx.draining, 1);
	ruda__reply__free_unpacked(r, NULL);
	/* a second drain is answered but does not call the hook again */
	r = ADMIN(drain, Ruda__AdminDrain, RUDA__ADMIN_DRAIN__INIT, RUDA__ADMIN__BODY_DRAIN);
	ck_assert_int_eq(r->status, RUDA__STATUS__OK);
	ck_assert_int_eq(f.drains, 1);
	ruda__reply__free_unpacked(r, NULL);

	r = ADMIN(status, Ruda__AdminStatus, RUDA__ADMIN_STATUS__INIT, RUDA__ADMIN__BODY_STATUS);
	ck_assert_int_eq(r->status, RUDA__STATUS__OK);
	ck_assert(r->admin->status->draining);
	ck_assert(r->admin->status->admin);
	ck_assert_uint_eq(r->admin->status->sessions, 1);
	ck_assert_uint_eq(r->admin->status->session_id, 1);
	ruda__reply__free_unpacked(r, NULL);

	r = ADMIN(shutdown, Ruda__AdminShutdown, RUDA__ADMIN_SHUTDOWN__INIT,
		  RUDA__ADMIN__BODY_SHUTDOWN);
	ck_assert_int_eq(r->status, RUDA__STATUS__OK);
	ck_assert_int_eq(r->admin->body_case, RUDA__ADMIN_REPLY__BODY_SHUTDOWN);
	ck_assert_int_eq(f.shutdowns, 1);
	ruda__reply__free_unpacked(r, NULL);
	fixture_finish(&f);
}
END_TEST

START_TEST(without_hooks_unsupported)
{
	struct fixture f;
	fixture_init(&f, 0);
	f.ctx.drain = NULL;
	f.ctx.shutdown = NULL;
	Ruda__Reply *r = ADMIN(drain, Ruda__AdminDrain, RUDA__ADMIN_DRAIN__INIT,
			       RUDA__ADMIN__BODY_DRAIN);
	ck_assert_int_eq(r->status, RUDA__STATUS__ERROR_UNSUPPORTED);
	ck_assert_int_eq(f.ctx.draining, 0);
	ruda__reply__free_unpacked(r, NULL);
	r = ADMIN(shutdown, Ruda__AdminShutdown, RUDA__ADMIN_SHUTDOWN__INIT,
		  RUDA__ADMIN__BODY_SHUTDOWN);
	ck_assert_int_eq(r->status, RUDA__STATUS__ERROR_UNSUPPORTED);
	ruda__reply__free_unpacked(r, NULL);
	/* an admin request this daemon does not know (a newer rudactl) */
	Ruda__Admin a = RUDA__ADMIN__INIT;
	a.body_case = (Ruda__Admin__BodyCase)99;
	r = admin(&f, &a);
	ck_assert_int_eq(r->status, RUDA__STATUS__ERROR_UNSUPPORTED);
	ruda__reply__free_unpacked(r, NULL);
	ck_assert_int_eq(f.s->state, RUDA_SESSION_READY);
	fixture_finish(&f);
}
END_TEST

/* No policy: commands are root's, views everyone's. */
START_TEST(non_root_refused_without_policy)
{
	struct fixture f;
	fixture_init(&f, 65534);
	Ruda__Reply *r = ADMIN(drain, Ruda__AdminDrain, RUDA__ADMIN_DRAIN__INIT,
			       RUDA__ADMIN__BODY_DRAIN);
	ck_assert_int_eq(r->status, RUDA__STATUS__ERROR_PERMISSION);
	ck_assert_ptr_nonnull(strstr(r->message, "permission denied"));
	ck_assert_ptr_nonnull(strstr(r->message, "uid 65534"));
	ck_assert_int_eq(f.drains, 0);
	ruda__reply__free_unpacked(r, NULL);
	r = ADMIN(shutdown, Ruda__AdminShutdown, RUDA__ADMIN_SHUTDOWN__INIT,
		  RUDA__ADMIN__BODY_SHUTDOWN);
	ck_assert_int_eq(r->status, RUDA__STATUS__ERROR_PERMISSION);
	ck_assert_int_eq(f.shutdowns, 0);
	ruda__reply__free_unpacked(r, NULL);
	r = ADMIN(clients, Ruda__AdminClients, RUDA__ADMIN_CLIENTS__INIT,
		  RUDA__ADMIN__BODY_CLIENTS);
	ck_assert_int_eq(r->status, RUDA__STATUS__OK);
	ck_assert_uint_eq(r->admin->clients->n_clients, 1);
	ck_assert_uint_eq(r->admin->clients->clients[0]->uid, 65534);
	ck_assert_str_eq(r->admin->clients->clients[0]->state, "ready");
	ruda__reply__free_unpacked(r, NULL);
	/* the connection stays open */
	ck_assert_int_eq(f.s->state, RUDA_SESSION_READY);
	fixture_finish(&f);
}
END_TEST

/* With a policy: admin_group members are administrators; views follow
 * read_only_views. */
START_TEST(policy_decides)
{
	struct fixture f;
	fixture_init(&f, 65534);
	ruda__config_init(&f.config);
	f.config.admin_group = strdup("wheelish");
	f.config.admin_gid = 4242;
	f.config.read_only_views = false;
	ruda__policy_init(&f.policy, &f.config);
	f.ctx.policy = &f.policy;

	f.s->gid = 1000;
	Ruda__Reply *r = ADMIN(clients, Ruda__AdminClients, RUDA__ADMIN_CLIENTS__INIT,
			       RUDA__ADMIN__BODY_CLIENTS);
	ck_assert_int_eq(r->status, RUDA__STATUS__ERROR_PERMISSION);
	ck_assert_ptr_nonnull(strstr(r->message, "read_only_views"));
	ck_assert_ptr_nonnull(strstr(r->message, "wheelish"));
	ruda__reply__free_unpacked(r, NULL);

	f.config.read_only_views = true; /* as a reload would */
	r = ADMIN(clients, Ruda__AdminClients, RUDA__ADMIN_CLIENTS__INIT,
		  RUDA__ADMIN__BODY_CLIENTS);
	ck_assert_int_eq(r->status, RUDA__STATUS__OK);
	ruda__reply__free_unpacked(r, NULL);
	r = ADMIN(drain, Ruda__AdminDrain, RUDA__ADMIN_DRAIN__INIT, RUDA__ADMIN__BODY_DRAIN);
	ck_assert_int_eq(r->status, RUDA__STATUS__ERROR_PERMISSION);
	ruda__reply__free_unpacked(r, NULL);

	f.s->gid = 4242; /* now in the admin group */
	r = ADMIN(drain, Ruda__AdminDrain, RUDA__ADMIN_DRAIN__INIT, RUDA__ADMIN__BODY_DRAIN);
	ck_assert_int_eq(r->status, RUDA__STATUS__OK);
	ck_assert_int_eq(f.drains, 1);
	ruda__reply__free_unpacked(r, NULL);
	fixture_finish(&f);
}
END_TEST

START_TEST(kill_marks_the_target)
{
	struct fixture f;
	fixture_init(&f, 0);
	int other_peer;
	struct ruda_session *other = add_session(&f, 7, 1000, &other_peer);
	Ruda__AdminKill k = RUDA__ADMIN_KILL__INIT;
	Ruda__Admin a = RUDA__ADMIN__INIT;
	a.body_case = RUDA__ADMIN__BODY_KILL;
	a.kill = &k;

	k.client = 1; /* itself */
	Ruda__Reply *r = admin(&f, &a);
	ck_assert_int_eq(r->status, RUDA__STATUS__ERROR_INVALID_ARGUMENT);
	ruda__reply__free_unpacked(r, NULL);
	k.client = 8; /* nobody */
	r = admin(&f, &a);
	ck_assert_int_eq(r->status, RUDA__STATUS__ERROR_INVALID_ARGUMENT);
	ck_assert_ptr_nonnull(strstr(r->message, "no client 8"));
	ruda__reply__free_unpacked(r, NULL);

	k.client = 7;
	r = admin(&f, &a);
	ck_assert_int_eq(r->status, RUDA__STATUS__OK);
	ck_assert_uint_eq(r->admin->kill->client, 7);
	ck_assert_str_eq(r->admin->kill->name, "session-7");
	ck_assert_uint_eq(r->admin->kill->uid, 1000);
	ruda__reply__free_unpacked(r, NULL);
	ck_assert_int_eq(other->state, RUDA_SESSION_DEAD);
	ck_assert_ptr_eq(f.ctx.dead, other);
	/* destroyed at the end of the iteration: its peer sees the hang-up */
	ruda__connection_tick(&f.ctx);
	ck_assert_ptr_null(ruda__handle_table_get(&f.ctx.sessions, 7));
	ck_assert(raw_closed_by_peer(other_peer, 1000));
	close(other_peer);
	r = admin(&f, &a);
	ck_assert_int_eq(r->status, RUDA__STATUS__ERROR_INVALID_ARGUMENT);
	ruda__reply__free_unpacked(r, NULL);
	fixture_finish(&f);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("admin");
	TCase *tc = tcase_create("admin");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, drain_and_shutdown_call_the_hooks);
	tcase_add_test(tc, without_hooks_unsupported);
	tcase_add_test(tc, non_root_refused_without_policy);
	tcase_add_test(tc, policy_decides);
	tcase_add_test(tc, kill_marks_the_target);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
