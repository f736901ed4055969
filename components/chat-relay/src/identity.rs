//! Who a socket acts as, and what an `auth` frame may change about it.

use crate::api::Caller;
use crate::token::UserToken;

/// The credential a socket's API calls carry.
#[derive(Clone, Debug)]
pub enum Identity {
    /// A signed-in user: reads and writes as that user until the token expires; with the
    /// socket ticket it was opened (or signed in) with, if any.
    User(UserToken, Option<String>),
    /// Anonymous: reads public or unlisted chat of a tenant, cannot write.
    ReadOnly(Caller),
}

/// What to do with a verified token an `auth` frame brought.
#[derive(Debug, PartialEq, Eq)]
pub enum AuthChange {
    /// The same user's fresher token: use it from now on.
    Refresh,
    /// A read-only socket signs in: use it once the API confirms that user may read this
    /// stream (which also proves the token's tenant is the stream's).
    SignIn,
}

/// Why an `auth` frame's token does not fit the socket.
#[derive(Debug, PartialEq, Eq)]
pub struct Mismatch(pub &'static str);

/// Why a socket may not write (post or delete) now.
#[derive(Debug, PartialEq, Eq)]
pub enum WriteRefusal {
    /// Opened without a user token, and not signed in since.
    ReadOnly,
    /// The user token expired and was not refreshed; the socket still reads.
    Expired,
}

impl Identity {
    /// The credential for an API call.
    pub fn caller(&self) -> Caller {
        match self {
            Identity::User(t, ticket) => Caller::User {
                token: t.token.clone(),
                ticket: ticket.clone(),
            },
            Identity::ReadOnly(caller) => caller.clone(),
        }
    }

    /// The credential for a write at `now` (epoch seconds).
    pub fn writer(&self, now: i64) -> Result<Caller, WriteRefusal> {
        match self {
            Identity::ReadOnly(_) => Err(WriteRefusal::ReadOnly),
            Identity::User(t, _) if t.is_expired(now) => Err(WriteRefusal::Expired),
            Identity::User(..) => Ok(self.caller()),
        }
    }

    /// Whether `new` may replace this identity: a user socket keeps its user and tenant;
    /// a read-only socket of a named tenant accepts only that tenant's users.
    pub fn accepts(&self, new: &UserToken) -> Result<AuthChange, Mismatch> {
        match self {
            Identity::User(current, _) => {
                if current.tenant_id != new.tenant_id || current.user_id != new.user_id {
                    return Err(Mismatch("a socket keeps its user: sign in on a new socket"));
                }
                Ok(AuthChange::Refresh)
            }
            Identity::ReadOnly(Caller::Tenant { client_id, .. }) => {
                if client_id.as_str() != new.tenant_id {
                    return Err(Mismatch("the token is of another tenant"));
                }
                Ok(AuthChange::SignIn)
            }
            Identity::ReadOnly(_) => Ok(AuthChange::SignIn),
        }
    }

    /// The socket ticket the socket's calls forward.
    pub fn ticket(&self) -> Option<&str> {
        match self {
            Identity::User(_, ticket) | Identity::ReadOnly(Caller::Tenant { ticket, .. }) => {
                ticket.as_deref()
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::Uuid;

    const TENANT: &str = "6f9619ff-8b86-4011-b42d-00c04fc964ff";

    fn token(user: &str, tenant: &str) -> UserToken {
        UserToken {
            token: format!("{user}@{tenant}"),
            user_id: user.into(),
            tenant_id: tenant.into(),
            expires_at: 0,
        }
    }

    #[test]
    fn a_user_socket_refreshes_only_with_its_own_users_token() {
        let socket = Identity::User(token("ada", TENANT), None);
        assert_eq!(
            socket.accepts(&token("ada", TENANT)),
            Ok(AuthChange::Refresh)
        );
        assert!(socket.accepts(&token("bob", TENANT)).is_err());
        assert!(socket.accepts(&token("ada", "another-tenant")).is_err());
    }

    #[test]
    fn a_read_only_socket_signs_in_with_a_user_of_its_tenant() {
        let named = Identity::ReadOnly(Caller::Tenant {
            client_id: Uuid::parse(TENANT).unwrap(),
            ticket: None,
        });
        assert_eq!(named.accepts(&token("ada", TENANT)), Ok(AuthChange::SignIn));
        assert!(named.accepts(&token("ada", "another-tenant")).is_err());
        // An API-key socket's tenant is known to the API only: it decides on sign-in.
        let by_key = Identity::ReadOnly(Caller::ApiKey {
            api_key: "pk_x".into(),
        });
        assert_eq!(
            by_key.accepts(&token("ada", TENANT)),
            Ok(AuthChange::SignIn)
        );
    }

    #[test]
    fn only_a_user_with_an_unexpired_token_writes() {
        let mut t = token("ada", TENANT);
        t.expires_at = 100;
        let socket = Identity::User(t, None);
        assert!(socket.writer(99).is_ok());
        assert_eq!(socket.writer(100).err(), Some(WriteRefusal::Expired));
        let viewer = Identity::ReadOnly(Caller::ApiKey {
            api_key: "pk_x".into(),
        });
        assert_eq!(viewer.writer(0).err(), Some(WriteRefusal::ReadOnly));
    }

    #[test]
    fn the_caller_carries_the_current_credential() {
        let socket = Identity::User(token("ada", TENANT), Some("ticket".into()));
        assert!(matches!(
            socket.caller(),
            Caller::User { token, ticket: Some(ticket) }
                if token == format!("ada@{TENANT}") && ticket == "ticket"
        ));
    }
}
