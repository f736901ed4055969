//! Chat moderation rules: who may post now under a stream's restrictions and modes. Plain
//! functions over what the store read; the chat post runs them for every message, from
//! REST and from the relay alike.

use serde::{Deserialize, Serialize};

/// Longest timeout: two weeks.
pub const MAX_TIMEOUT_SECS: i64 = 14 * 86_400;
/// Longest slow-mode interval.
pub const MAX_SLOW_MODE_SECS: i64 = 3_600;
/// Longest followers-only wait: 90 days.
pub const MAX_FOLLOW_MINUTES: i64 = 90 * 1_440;
/// Longest reason of a timeout, ban, report or resolution.
pub const MAX_REASON_CHARS: usize = 500;

/// Where a restriction holds: one stream's chat, or every stream of a creator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    Stream,
    Channel,
}

impl Scope {
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Stream => "stream",
            Scope::Channel => "channel",
        }
    }

    pub fn parse(s: &str) -> Option<Scope> {
        match s {
            "stream" => Some(Scope::Stream),
            "channel" => Some(Scope::Channel),
            _ => None,
        }
    }
}

/// A timeout (ends at `until_ms`) or a ban (`until_ms` None).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Restriction {
    pub scope: Scope,
    pub until_ms: Option<i64>,
}

impl Restriction {
    pub fn is_ban(&self) -> bool {
        self.until_ms.is_none()
    }

    pub fn in_force(&self, now_ms: i64) -> bool {
        self.until_ms.is_none_or(|until| until > now_ms)
    }
}

/// The restriction that counts at `now_ms`: a ban before any timeout, else the timeout
/// that ends last.
pub fn binding(restrictions: &[Restriction], now_ms: i64) -> Option<&Restriction> {
    let live = restrictions.iter().filter(|r| r.in_force(now_ms));
    live.max_by_key(|r| r.until_ms.unwrap_or(i64::MAX))
}

/// A stream's chat modes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Modes {
    /// One message per this many seconds per viewer; 0 is off.
    pub slow_mode_seconds: i64,
    /// Only followers (of at least this many minutes) may chat; None is off.
    pub followers_only_minutes: Option<i64>,
    pub subscribers_only: bool,
    /// Only emoji and `:reaction:` codes.
    pub reactions_only: bool,
}

impl Modes {
    /// Checks the bounds; answers the field and why on the first that is out of them.
    pub fn check(&self) -> Result<(), (&'static str, String)> {
        if !(0..=MAX_SLOW_MODE_SECS).contains(&self.slow_mode_seconds) {
            return Err((
                "slowModeSeconds",
                format!("must be 0 (off) to {MAX_SLOW_MODE_SECS}"),
            ));
        }
        if let Some(m) = self.followers_only_minutes
            && !(0..=MAX_FOLLOW_MINUTES).contains(&m)
        {
            return Err((
                "followersOnlyMinutes",
                format!("must be null (off) or 0 to {MAX_FOLLOW_MINUTES}"),
            ));
        }
        Ok(())
    }
}

/// What a creator does with a message that matches a blocked word.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BlockedAction {
    #[default]
    Reject,
    Hold,
}

impl BlockedAction {
    pub fn as_str(self) -> &'static str {
        match self {
            BlockedAction::Reject => "reject",
            BlockedAction::Hold => "hold",
        }
    }

    pub fn parse(s: &str) -> Option<BlockedAction> {
        match s {
            "reject" => Some(BlockedAction::Reject),
            "hold" => Some(BlockedAction::Hold),
            _ => None,
        }
    }
}

/// What the rules know of the poster.
#[derive(Debug, Clone, Default)]
pub struct Poster {
    /// The owner or a co-host with canModerateChat: exempt from every mode and filter.
    pub is_moderator: bool,
    /// When the poster began following the creator (epoch ms), if they do.
    pub following_since_ms: Option<i64>,
    /// Whether the poster subscribes to the creator (false while subscriptions do not
    /// exist: subscribers-only chat is then for moderators alone).
    pub is_subscriber: bool,
}

/// Why a message is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    Banned(Scope),
    TimedOut { until_ms: i64 },
    FollowersOnly { minutes: i64 },
    SubscribersOnly,
    ReactionsOnly,
}

/// Whether a restriction or a mode refuses the message. Slow mode is counted apart (it
/// records the post); blocked words are matched after these.
pub fn check_post(
    restriction: Option<&Restriction>,
    modes: &Modes,
    poster: &Poster,
    message: &str,
    now_ms: i64,
) -> Result<(), Refusal> {
    if let Some(r) = restriction.filter(|r| r.in_force(now_ms)) {
        return Err(match r.until_ms {
            None => Refusal::Banned(r.scope),
            Some(until_ms) => Refusal::TimedOut { until_ms },
        });
    }
    if poster.is_moderator {
        return Ok(());
    }
    if let Some(minutes) = modes.followers_only_minutes {
        let long_enough = poster
            .following_since_ms
            .is_some_and(|since| since + minutes * 60_000 <= now_ms);
        if !long_enough {
            return Err(Refusal::FollowersOnly { minutes });
        }
    }
    if modes.subscribers_only && !poster.is_subscriber {
        return Err(Refusal::SubscribersOnly);
    }
    if modes.reactions_only && !is_reaction_only(message) {
        return Err(Refusal::ReactionsOnly);
    }
    Ok(())
}

/// The slow-mode interval that applies to the poster, if any.
pub fn slow_mode_for(modes: &Modes, poster: &Poster) -> Option<i64> {
    (modes.slow_mode_seconds > 0 && !poster.is_moderator).then_some(modes.slow_mode_seconds)
}

/// Whether a message is only emoji and `:reaction:` codes (and spaces).
pub fn is_reaction_only(message: &str) -> bool {
    let mut any = false;
    for word in message.split_whitespace() {
        let is_code = word.len() > 2
            && word.starts_with(':')
            && word.ends_with(':')
            && word[1..word.len() - 1]
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'+'));
        if !is_code && !word.chars().all(is_emoji_part) {
            return false;
        }
        any = true;
    }
    any
}

fn is_emoji_part(c: char) -> bool {
    matches!(c as u32,
        0x1F000..=0x1FAFF   // pictographs, emoticons, transport, supplemental symbols
        | 0x2600..=0x27BF   // miscellaneous symbols, dingbats
        | 0x2B00..=0x2BFF   // arrows, stars
        | 0x2190..=0x21FF   // arrows
        | 0x2300..=0x23FF   // technical (⌚, ⏰)
        | 0x200D            // zero-width joiner
        | 0xFE0F | 0xFE0E   // variation selectors
        | 0x20E3            // keycap
        | 0xE0020..=0xE007F // tags (flags)
        | 0x3030 | 0x303D | 0x3297 | 0x3299 | 0x00A9 | 0x00AE | 0x2122)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: i64 = 60_000;

    fn timeout(until_ms: i64) -> Restriction {
        Restriction {
            scope: Scope::Stream,
            until_ms: Some(until_ms),
        }
    }

    fn ban(scope: Scope) -> Restriction {
        Restriction {
            scope,
            until_ms: None,
        }
    }

    #[test]
    fn a_ban_beats_timeouts_and_timeouts_end() {
        let all = [timeout(5_000), ban(Scope::Channel), timeout(9_000)];
        assert_eq!(binding(&all, 1_000), Some(&all[1]));
        let timeouts = [timeout(5_000), timeout(9_000)];
        assert_eq!(binding(&timeouts, 1_000), Some(&timeouts[1]));
        assert_eq!(binding(&timeouts, 9_000), None, "over at its end");
        let viewer = Poster::default();
        let modes = Modes::default();
        assert_eq!(
            check_post(Some(&timeouts[1]), &modes, &viewer, "hi", 8_999),
            Err(Refusal::TimedOut { until_ms: 9_000 })
        );
        assert_eq!(
            check_post(Some(&timeouts[1]), &modes, &viewer, "hi", 9_000),
            Ok(())
        );
        // Even a moderator's own restriction holds (a creator cannot restrict themself,
        // but a co-host may be banned elsewhere before being given the permission).
        let moderator = Poster {
            is_moderator: true,
            ..Poster::default()
        };
        assert_eq!(
            check_post(Some(&all[1]), &modes, &moderator, "hi", 0),
            Err(Refusal::Banned(Scope::Channel))
        );
    }

    #[test]
    fn followers_only_counts_the_minutes_of_following() {
        let modes = Modes {
            followers_only_minutes: Some(10),
            ..Modes::default()
        };
        let stranger = Poster::default();
        let new_follower = Poster {
            following_since_ms: Some(100 * MIN),
            ..Poster::default()
        };
        let refused = Err(Refusal::FollowersOnly { minutes: 10 });
        assert_eq!(
            check_post(None, &modes, &stranger, "hi", 200 * MIN),
            refused
        );
        assert_eq!(
            check_post(None, &modes, &new_follower, "hi", 109 * MIN),
            refused
        );
        assert_eq!(
            check_post(None, &modes, &new_follower, "hi", 110 * MIN),
            Ok(())
        );
        let any_follower = Modes {
            followers_only_minutes: Some(0),
            ..Modes::default()
        };
        assert_eq!(
            check_post(None, &any_follower, &new_follower, "hi", 100 * MIN),
            Ok(())
        );
    }

    #[test]
    fn moderators_are_exempt_from_every_mode() {
        let strict = Modes {
            slow_mode_seconds: 30,
            followers_only_minutes: Some(60),
            subscribers_only: true,
            reactions_only: true,
        };
        let moderator = Poster {
            is_moderator: true,
            ..Poster::default()
        };
        assert_eq!(check_post(None, &strict, &moderator, "words", 0), Ok(()));
        assert_eq!(slow_mode_for(&strict, &moderator), None);
        let follower = Poster {
            following_since_ms: Some(0),
            ..Poster::default()
        };
        assert_eq!(slow_mode_for(&strict, &follower), Some(30));
        assert_eq!(
            check_post(None, &strict, &follower, "words", 3_600_000),
            Err(Refusal::SubscribersOnly)
        );
        let subscriber = Poster {
            is_subscriber: true,
            ..follower
        };
        assert_eq!(
            check_post(None, &strict, &subscriber, "words", 3_600_000),
            Err(Refusal::ReactionsOnly)
        );
        assert_eq!(
            check_post(None, &strict, &subscriber, "🎉 :heart:", 3_600_000),
            Ok(())
        );
        assert_eq!(slow_mode_for(&Modes::default(), &subscriber), None);
    }

    #[test]
    fn reactions_are_emoji_and_codes() {
        for yes in ["🎉", "👍🏽 ❤️", ":heart: :+1:", "👨‍👩‍👧", "🇫🇷"] {
            assert!(is_reaction_only(yes), "{yes}");
        }
        for no in ["hi 🎉", ":heart", "::", "", "   ", "heart:", "🎉!"] {
            assert!(!is_reaction_only(no), "{no:?}");
        }
    }

    #[test]
    fn modes_are_bounded() {
        let ok = Modes {
            slow_mode_seconds: 3_600,
            followers_only_minutes: Some(0),
            ..Modes::default()
        };
        assert!(ok.check().is_ok());
        let slow = Modes {
            slow_mode_seconds: -1,
            ..Modes::default()
        };
        assert_eq!(slow.check().unwrap_err().0, "slowModeSeconds");
        let follow = Modes {
            followers_only_minutes: Some(MAX_FOLLOW_MINUTES + 1),
            ..Modes::default()
        };
        assert_eq!(follow.check().unwrap_err().0, "followersOnlyMinutes");
        assert_eq!(BlockedAction::parse("hold"), Some(BlockedAction::Hold));
        assert_eq!(BlockedAction::parse("drop"), None);
        assert_eq!(Scope::parse(Scope::Channel.as_str()), Some(Scope::Channel));
    }
}
