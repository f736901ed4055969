//! Who may watch a broadcast or a scheduled event's room: the one rule behind the API's
//! reads, the SFU's tokens, gifts and chat.

use crate::broadcasts::Broadcast;
use crate::{Db, cohosts, subscriptions};
use domain::ApiError;
use domain::broadcast::Visibility;

/// Who asks to watch.
#[derive(Debug, Clone, Copy)]
pub enum Viewer<'a> {
    /// Someone with the app's public API key and nothing else.
    Guest,
    /// A signed-in user, by id.
    User(&'a str),
    /// The tenant's own backend.
    Server,
}

/// A request's caller, as the one who asks to watch: the Spin edge's callers and actors
/// (`edge::spin::http::{Caller, Actor}`) say which viewer they are.
pub trait AsViewer {
    fn as_viewer(&self) -> Viewer<'_>;
}

impl<'a> Viewer<'a> {
    /// The caller as a viewer of a broadcast or an event.
    pub fn of(caller: &'a impl AsViewer) -> Viewer<'a> {
        caller.as_viewer()
    }

    pub fn of_actor(actor: &'a impl AsViewer) -> Viewer<'a> {
        actor.as_viewer()
    }
}

/// What is watched, as far as the rule needs to know it.
#[derive(Debug, Clone, Copy)]
pub struct Watched<'a> {
    pub client_id: &'a str,
    /// None for a session the tenant's server created.
    pub owner_id: Option<&'a str>,
    pub visibility: Visibility,
    /// A broadcast's id: its co-hosts (active or asking to join) and invitees watch it too.
    /// None for a scheduled event, which has no co-hosts.
    pub broadcast_id: Option<&'a str>,
}

impl<'a> Watched<'a> {
    pub fn broadcast(b: &'a Broadcast) -> Watched<'a> {
        Watched {
            client_id: &b.client_id,
            owner_id: b.owner_id.as_deref(),
            visibility: b.visibility,
            broadcast_id: Some(&b.id),
        }
    }

    pub fn event(client_id: &'a str, owner_id: &'a str, visibility: Visibility) -> Watched<'a> {
        Watched {
            client_id,
            owner_id: Some(owner_id),
            visibility,
            broadcast_id: None,
        }
    }
}

/// Whether `viewer` may watch: anyone of the tenant, guests included, when it is public or
/// unlisted. A gated one (private, subscribers) only the tenant's server, its owner, a
/// broadcast's co-hosts and invitees, and for `subscribers` also the owner's active
/// subscribers.
pub fn may_watch(
    db: &Db,
    watched: Watched<'_>,
    viewer: Viewer<'_>,
    now: i64,
) -> Result<bool, ApiError> {
    if !watched.visibility.is_gated() {
        return Ok(true);
    }
    let user = match viewer {
        Viewer::Server => return Ok(true),
        Viewer::Guest => return Ok(false),
        Viewer::User(user) => user,
    };
    if watched.owner_id == Some(user) {
        return Ok(true);
    }
    if let Some(broadcast_id) = watched.broadcast_id
        && cohosts::is_invited_or_host(db, watched.client_id, broadcast_id, user, now)?
    {
        return Ok(true);
    }
    match (watched.owner_id, watched.visibility) {
        (Some(owner), Visibility::Subscribers) => {
            subscriptions::is_subscriber(db, watched.client_id, owner, user, now)
        }
        _ => Ok(false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::subscriptions::{self, Plan};
    use crate::{broadcasts, testing};

    const NOW: i64 = 1_000;

    fn broadcast(db: &Db, visibility: Visibility) -> Broadcast {
        let new = broadcasts::NewBroadcast {
            visibility,
            ..testing::new_broadcast()
        };
        broadcasts::insert(db, "c1", Some("ada"), &new, NOW).unwrap()
    }

    fn subscribe(db: &Db, subscriber: &str) {
        let plan = Plan {
            id: "gold".into(),
            creator_id: "ada".into(),
            name: "Gold".into(),
            price_tokens: 10,
            perks: Vec::new(),
            active: true,
        };
        subscriptions::put_plan(db, "c1", &plan, NOW).unwrap();
        let id = format!("s-{subscriber}");
        subscriptions::start(db, "c1", &id, "ada", subscriber, &plan, NOW).unwrap();
    }

    fn watchers(db: &Db, watched: Watched<'_>) -> Vec<&'static str> {
        let viewers = [
            ("guest", Viewer::Guest),
            ("server", Viewer::Server),
            ("owner", Viewer::User("ada")),
            ("invitee", Viewer::User("ivy")),
            ("subscriber", Viewer::User("sam")),
            ("stranger", Viewer::User("zed")),
        ];
        viewers
            .into_iter()
            .filter(|(_, viewer)| may_watch(db, watched, *viewer, NOW).unwrap())
            .map(|(name, _)| name)
            .collect()
    }

    #[test]
    fn each_visibility_has_its_audience() {
        let db = testing::db();
        subscribe(&db, "sam");
        let everyone = [
            "guest",
            "server",
            "owner",
            "invitee",
            "subscriber",
            "stranger",
        ];
        for visibility in [Visibility::Public, Visibility::Unlisted] {
            let b = broadcast(&db, visibility);
            assert_eq!(watchers(&db, Watched::broadcast(&b)), everyone);
        }
        for (visibility, audience) in [
            (Visibility::Private, vec!["server", "owner", "invitee"]),
            (
                Visibility::Subscribers,
                vec!["server", "owner", "invitee", "subscriber"],
            ),
        ] {
            let b = broadcast(&db, visibility);
            crate::cohosts::add_invite(
                &db,
                &b,
                &format!("hash-{}", b.id),
                "ivy",
                Default::default(),
                "ada",
                NOW + 60,
            )
            .unwrap();
            assert_eq!(watchers(&db, Watched::broadcast(&b)), audience);
            // An invite that has expired lets no one in.
            assert!(
                !may_watch(&db, Watched::broadcast(&b), Viewer::User("ivy"), NOW + 60).unwrap()
            );
        }
    }

    #[test]
    fn an_event_has_no_co_hosts_and_its_subscribers_watch_a_subscribers_event() {
        let db = testing::db();
        subscribe(&db, "sam");
        let event = |v| Watched::event("c1", "ada", v);
        assert_eq!(
            watchers(&db, event(Visibility::Private)),
            ["server", "owner"]
        );
        assert_eq!(
            watchers(&db, event(Visibility::Subscribers)),
            ["server", "owner", "subscriber"]
        );
        assert_eq!(watchers(&db, event(Visibility::Public)).len(), 6);
        // Another tenant's subscription counts for nothing.
        let elsewhere = Watched::event("c2", "ada", Visibility::Subscribers);
        assert_eq!(watchers(&db, elsewhere), ["server", "owner"]);
    }
}
