//! Which SFU room a session id names, and whether it may still be published to.

use domain::ApiError;
use domain::broadcast::{Status, Visibility};
use domain::ids;
use domain::sfu::Role;
use store::app::access::Watched;
use store::app::rooms;
use store::{Db, cohosts};

/// Participants allowed in a room created for a scheduled event.
const EVENT_MAX_PARTICIPANTS: u32 = 100;

/// The forms a session id may take.
#[derive(Debug, PartialEq, Eq)]
pub enum IdForm {
    /// A broadcast id, a broadcast's streamId or an event's room name.
    Uuid(String),
    /// A broadcast's (or an event's) 8-character short id.
    ShortId(String),
}

/// Classifies `raw`; anything that cannot be an id of ours is a 400.
pub fn classify(raw: &str) -> Result<IdForm, ApiError> {
    if let Some(uuid) = ids::parse_uuid(raw) {
        return Ok(IdForm::Uuid(uuid));
    }
    if raw.len() == 8 && raw.bytes().all(|b| b.is_ascii_alphanumeric()) {
        return Ok(IdForm::ShortId(raw.to_string()));
    }
    Err(ApiError::bad_request(
        "invalid_id",
        "the session id must be a UUID, a short id or a room name",
    ))
}

/// What a room belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Broadcast,
    Event,
}

/// The room a token is for.
#[derive(Debug)]
pub struct Room {
    pub name: String,
    pub kind: Kind,
    /// The broadcast or event the room belongs to.
    pub session_id: String,
    /// Its owner; a session an SDK client created through its API key has none.
    pub owner_id: Option<String>,
    /// A broadcast's status; events have none.
    pub status: Option<Status>,
    pub max_participants: u32,
    pub visibility: Visibility,
}

/// A participant's standing as a co-host of a broadcast.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CoHostStanding {
    None,
    /// Asked to join; the host has not approved yet.
    Requested,
    Active,
    /// Removed, or the request was declined.
    Removed,
}

impl Room {
    /// The room as [`store::app::access::may_watch`] sees it: a broadcast's co-hosts and
    /// invitees watch it, an event has none.
    pub fn watched<'a>(&'a self, client_id: &'a str) -> Watched<'a> {
        Watched {
            client_id,
            owner_id: self.owner_id.as_deref(),
            visibility: self.visibility,
            broadcast_id: (self.kind == Kind::Broadcast).then_some(self.session_id.as_str()),
        }
    }

    /// A broadcast that has completed or failed takes no new publishers.
    pub fn ensure_publishable(&self) -> Result<(), ApiError> {
        match self.status {
            Some(status) if status.is_final() => Err(ApiError::conflict(
                "broadcast_ended",
                format!(
                    "the broadcast is {}; it takes no new publishers",
                    status.as_str()
                ),
            )),
            _ => Ok(()),
        }
    }

    /// Whether `identity` owns the room's broadcast or event.
    pub fn is_owned_by(&self, identity: &str) -> bool {
        self.owner_id.as_deref() == Some(identity)
    }

    /// Which publishing role a signed-in user gets: the owner `publisher`, an approved
    /// co-host `co_host`; nobody else publishes (a session the tenant's server created has
    /// no owner: its publishers get their tokens from the server).
    pub fn publisher_role(
        &self,
        identity: &str,
        standing: CoHostStanding,
    ) -> Result<Role, ApiError> {
        if self.is_owned_by(identity) {
            return Ok(Role::Publisher);
        }
        match standing {
            CoHostStanding::Active => Ok(Role::CoHost),
            CoHostStanding::Requested => Err(ApiError::new(
                403,
                "cohost_not_approved",
                "the host has not approved this co-host request yet",
            )),
            CoHostStanding::Removed => Err(ApiError::new(
                403,
                "cohost_removed",
                "this participant was removed as a co-host and may not publish",
            )),
            CoHostStanding::None => Err(ApiError::new(
                403,
                "not_a_host",
                "only the session's owner and its co-hosts may publish",
            )),
        }
    }
}

/// The participant's co-host standing in a broadcast of the tenant.
pub fn cohost_standing(
    db: &Db,
    client_id: &str,
    room: &Room,
    identity: &str,
) -> Result<CoHostStanding, ApiError> {
    if room.kind != Kind::Broadcast {
        return Ok(CoHostStanding::None);
    }
    Ok(
        match cohosts::status_of(db, client_id, &room.session_id, identity)?.as_deref() {
            Some("active") => CoHostStanding::Active,
            Some("requested") => CoHostStanding::Requested,
            Some(_) => CoHostStanding::Removed,
            None => CoHostStanding::None,
        },
    )
}

/// Finds the tenant's room for `raw_id` (any id form of a broadcast or a scheduled event).
/// A broadcast is read through the one broadcast loader, so a stale one is already `error`.
pub fn resolve(db: &Db, client_id: &str, raw_id: &str, now: i64) -> Result<Room, ApiError> {
    let id = match classify(raw_id)? {
        IdForm::Uuid(id) | IdForm::ShortId(id) => id,
    };
    let room = match rooms::find(db, client_id, &id, now)? {
        Some(rooms::Room::Broadcast(b)) => {
            let b = *b;
            Room {
                name: b.identity.stream_id,
                kind: Kind::Broadcast,
                session_id: b.id,
                owner_id: b.owner_id,
                status: Some(b.status),
                max_participants: u32::try_from(b.max_participants).unwrap_or(1),
                visibility: b.visibility,
            }
        }
        Some(rooms::Room::Event(e)) => Room {
            name: e.room_name,
            kind: Kind::Event,
            session_id: e.id,
            owner_id: Some(e.owner_id),
            status: None,
            max_participants: EVENT_MAX_PARTICIPANTS,
            visibility: e.visibility,
        },
        None => return Err(ApiError::not_found("session")),
    };
    Ok(room)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn id_forms() {
        let uuid = "0B5F6A9E-1D3C-4C1E-9A57-2F0A4C1B7E11";
        assert_eq!(
            classify(uuid).unwrap(),
            IdForm::Uuid(uuid.to_ascii_lowercase())
        );
        assert_eq!(
            classify("Ab3dEf9h").unwrap(),
            IdForm::ShortId("Ab3dEf9h".into())
        );
        for bad in [
            "",
            "short",
            "Ab3dEf9h0",
            "../../etc",
            "Ab3d-f9h",
            "Ab3dEf9%",
        ] {
            assert_eq!(classify(bad).unwrap_err().status, 400, "{bad}");
        }
    }

    #[test]
    fn ended_broadcasts_take_no_publishers() {
        let room = |status| Room {
            name: "r".into(),
            kind: Kind::Broadcast,
            session_id: "s".into(),
            owner_id: Some("owner".into()),
            status,
            max_participants: 100,
            visibility: Visibility::Public,
        };
        assert!(room(Some(Status::Active)).ensure_publishable().is_ok());
        assert!(room(Some(Status::Pending)).ensure_publishable().is_ok());
        assert!(room(None).ensure_publishable().is_ok());
        for status in [Status::Completed, Status::Error] {
            let err = room(Some(status)).ensure_publishable().unwrap_err();
            assert_eq!((err.status, err.code), (409, "broadcast_ended"));
        }
    }

    #[test]
    fn who_may_publish() {
        let mut room = Room {
            name: "r".into(),
            kind: Kind::Broadcast,
            session_id: "s".into(),
            owner_id: Some("owner".into()),
            status: Some(Status::Active),
            max_participants: 100,
            visibility: Visibility::Public,
        };
        use CoHostStanding::*;
        assert_eq!(room.publisher_role("owner", None).unwrap(), Role::Publisher);
        assert_eq!(room.publisher_role("ann", Active).unwrap(), Role::CoHost);
        assert_eq!(
            room.publisher_role("ann", Removed).unwrap_err().code,
            "cohost_removed"
        );
        assert_eq!(
            room.publisher_role("eve", None).unwrap_err().code,
            "not_a_host"
        );
        assert_eq!(
            room.publisher_role("ann", Requested).unwrap_err().code,
            "cohost_not_approved"
        );
        // A session the tenant's server created has no owner: no user publishes to it.
        room.owner_id = Option::None;
        assert_eq!(
            room.publisher_role("anyone", None).unwrap_err().code,
            "not_a_host"
        );
    }
}
