//! nginx-rtmp's `/stat` document (XML): per application, its live streams with their
//! byte counters, clients and metadata.

/// One live stream of one application.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Stream {
    pub app: String,
    /// The stream's name: the stream key the encoder published under.
    pub name: String,
    /// Bytes received from the publisher since the stream started.
    pub bytes_in: u64,
    pub clients: Vec<Client>,
    pub video: Option<Video>,
    pub audio: Option<Audio>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Client {
    /// nginx's client id: the `clientid` of its notifications.
    pub id: u64,
    pub publishing: bool,
    /// The last media timestamp received (milliseconds).
    pub timestamp: Option<u64>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Video {
    pub width: Option<i64>,
    pub height: Option<i64>,
    pub frame_rate: Option<f64>,
    pub codec: Option<String>,
    pub profile: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Audio {
    pub codec: Option<String>,
    pub channels: Option<i64>,
    pub sample_rate: Option<i64>,
}

impl Stream {
    /// The client publishing this stream.
    pub fn publisher(&self) -> Option<&Client> {
        self.clients.iter().find(|c| c.publishing)
    }
}

/// Every live stream of every application in a `/stat` document.
pub fn parse(xml: &str) -> Result<Vec<Stream>, String> {
    let doc = roxmltree::Document::parse(xml).map_err(|e| format!("unreadable /stat: {e}"))?;
    let mut streams = Vec::new();
    for app in doc.descendants().filter(|n| n.has_tag_name("application")) {
        let app_name = child_text(app, "name").unwrap_or_default();
        let lives = app.children().filter(|n| n.has_tag_name("live"));
        for stream in lives.flat_map(|l| l.children().filter(|n| n.has_tag_name("stream"))) {
            streams.push(Stream {
                app: app_name.to_string(),
                name: child_text(stream, "name").unwrap_or_default().to_string(),
                bytes_in: child_number(stream, "bytes_in").unwrap_or(0),
                clients: stream
                    .children()
                    .filter(|n| n.has_tag_name("client"))
                    .map(|c| Client {
                        id: child_number(c, "id").unwrap_or(0),
                        publishing: child(c, "publishing").is_some(),
                        timestamp: child_number(c, "timestamp"),
                    })
                    .collect(),
                video: child(stream, "meta")
                    .and_then(|m| child(m, "video"))
                    .map(|v| Video {
                        width: child_number(v, "width"),
                        height: child_number(v, "height"),
                        frame_rate: child_text(v, "frame_rate")
                            .and_then(|t| t.trim().parse::<f64>().ok())
                            .filter(|f| f.is_finite() && *f > 0.0),
                        codec: child_string(v, "codec"),
                        profile: child_string(v, "profile"),
                    }),
                audio: child(stream, "meta")
                    .and_then(|m| child(m, "audio"))
                    .map(|a| Audio {
                        codec: child_string(a, "codec"),
                        channels: child_number(a, "channels"),
                        sample_rate: child_number(a, "sample_rate"),
                    }),
            });
        }
    }
    Ok(streams)
}

fn child<'a, 'i>(node: roxmltree::Node<'a, 'i>, tag: &str) -> Option<roxmltree::Node<'a, 'i>> {
    node.children().find(|n| n.has_tag_name(tag))
}

fn child_text<'a>(node: roxmltree::Node<'a, '_>, tag: &str) -> Option<&'a str> {
    child(node, tag).and_then(|n| n.text())
}

fn child_string(node: roxmltree::Node<'_, '_>, tag: &str) -> Option<String> {
    child_text(node, tag)
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(str::to_string)
}

fn child_number<T: std::str::FromStr>(node: roxmltree::Node<'_, '_>, tag: &str) -> Option<T> {
    child_text(node, tag).and_then(|t| t.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "0123456789abcdef0123456789abcdef";

    #[test]
    fn parses_a_real_stat_document() {
        // Captured from nginx 1.22.1 + nginx-rtmp 1.2.2: one stream, published under its
        // key, and one player (as a restream reads it).
        let streams = parse(include_str!("../fixtures/stat.xml")).unwrap();
        assert_eq!(streams.len(), 1);
        let ingest = &streams[0];
        assert_eq!(ingest.app, "live");
        assert_eq!(ingest.name, KEY);
        assert_eq!(ingest.bytes_in, 126_503);
        assert_eq!(ingest.clients.len(), 2);
        let publisher = ingest.publisher().unwrap();
        assert_eq!(publisher.id, 1);
        assert_eq!(publisher.timestamp, Some(4223));
        assert!(!ingest.clients[0].publishing);
        assert_eq!(ingest.clients[0].id, 2);
        assert_eq!(
            ingest.video,
            Some(Video {
                width: Some(320),
                height: Some(240),
                frame_rate: Some(25.0),
                codec: Some("H264".into()),
                profile: Some("Baseline".into()),
            })
        );
        assert_eq!(
            ingest.audio,
            Some(Audio {
                codec: Some("AAC".into()),
                channels: Some(1),
                sample_rate: Some(44_100),
            })
        );
    }

    #[test]
    fn a_stream_without_metadata_and_an_empty_server() {
        let xml = "<rtmp><server><application><name>live</name><live>\
<stream><name>s</name><bytes_in>x</bytes_in><client><id>4</id><publishing/></client>\
</stream><nclients>1</nclients></live></application></server></rtmp>";
        let streams = parse(xml).unwrap();
        assert_eq!(streams.len(), 1);
        assert_eq!(streams[0].bytes_in, 0);
        assert_eq!(streams[0].video, None);
        assert_eq!(streams[0].publisher().unwrap().timestamp, None);
        assert!(parse("<rtmp><server></server></rtmp>").unwrap().is_empty());
        assert!(parse("<rtmp><unclosed>").is_err());
    }
}
