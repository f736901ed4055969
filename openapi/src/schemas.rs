//! The schemas derived from the components' own types: a view that has a type is described
//! by it (`schemars`), a request body declared with `request_body!` by its fields' kinds,
//! so the document cannot say something the code does not do.
//! The remaining schemas are still written in the components' fragments; a name defined
//! in both fails the build.

use common::validate::body::RequestBody;
use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde_json::{Map, Value};

/// Every derived schema, by name, referring to one another as `#/components/schemas/X`.
pub fn derived() -> Map<String, Value> {
    let settings = SchemaSettings::draft2020_12().for_serialize().with(|s| {
        s.definitions_path = "/components/schemas".into();
        s.meta_schema = None;
    });
    let mut generator = settings.into_generator();
    // The views answered, each with the named types it uses (a broadcast's ingest).
    add::<api::contract::BroadcastView>(&mut generator);
    add::<api::contract::EventView>(&mut generator);
    add::<api::contract::SessionView>(&mut generator);
    add::<api::contract::RegisteredClientView>(&mut generator);
    add::<api::contract::AuthSession>(&mut generator);
    add::<api::contract::FullProfile>(&mut generator);
    add::<api::contract::PublicUser>(&mut generator);
    add::<api::contract::WebhookEndpointView>(&mut generator);
    add::<api::contract::WebhookEndpointWithSecret>(&mut generator);
    add::<api::contract::WebhookDeliveryView>(&mut generator);
    add::<api::contract::CoHostJoinAnswer>(&mut generator);
    add::<api::contract::CoHostChanged>(&mut generator);
    add::<api::contract::CoHostInvite>(&mut generator);
    add::<api::contract::MultihostView>(&mut generator);
    add::<money::contract::TransferView>(&mut generator);
    add::<money::contract::TransactionView>(&mut generator);
    add::<money::contract::GiftView>(&mut generator);
    add::<money::contract::SupporterView>(&mut generator);
    add::<money::contract::PayoutView>(&mut generator);
    add::<money::contract::PlanView>(&mut generator);
    add::<money::contract::SubscriptionView>(&mut generator);
    let mut schemas = generator.take_definitions(true);
    // The request bodies, from their fields' kinds.
    add_body::<api::contract::NewBroadcastBody>(&mut schemas);
    add_body::<api::contract::NewSessionBody>(&mut schemas);
    add_body::<api::contract::BroadcastChangesBody>(&mut schemas);
    add_body::<api::contract::NewEventBody>(&mut schemas);
    add_body::<api::contract::LayoutChangesBody>(&mut schemas);
    add_body::<api::contract::StatusChangeBody>(&mut schemas);
    add_body::<api::contract::ViewerCountBody>(&mut schemas);
    add_body::<api::contract::SessionPatchBody>(&mut schemas);
    add_body::<api::contract::ReactionBody>(&mut schemas);
    add_body::<api::contract::NewPlaylistBody>(&mut schemas);
    add_body::<api::contract::PlaylistChangesBody>(&mut schemas);
    add_body::<money::contract::GiftToSendBody>(&mut schemas);
    add_body::<money::contract::CatalogEntryBody>(&mut schemas);
    add_body::<money::contract::CreditBody>(&mut schemas);
    add_body::<money::contract::ReversalBody>(&mut schemas);
    add_body::<money::contract::PayoutRequestBody>(&mut schemas);
    add_body::<money::contract::PayoutCompletionBody>(&mut schemas);
    add_body::<money::contract::PayoutRejectionBody>(&mut schemas);
    add_body::<money::contract::SubscribeBody>(&mut schemas);
    add_body::<money::contract::SubscriptionPlanBody>(&mut schemas);
    add_body::<api::contract::ContactFormBody>(&mut schemas);
    add_body::<api::contract::ContactNotesBody>(&mut schemas);
    add_body::<api::contract::ClientRegistrationBody>(&mut schemas);
    add_body::<api::contract::SignupBody>(&mut schemas);
    add_body::<api::contract::LoginBody>(&mut schemas);
    add_body::<api::contract::RefreshBody>(&mut schemas);
    add_body::<api::contract::ProfileChangesBody>(&mut schemas);
    add_body::<api::contract::PasswordChangeBody>(&mut schemas);
    add_body::<api::contract::NewWebhookEndpointBody>(&mut schemas);
    add_body::<api::contract::WebhookEndpointChangesBody>(&mut schemas);
    add_body::<api::contract::WebhookRecoveryBody>(&mut schemas);
    add_body::<api::contract::CoHostJoinBody>(&mut schemas);
    add_body::<api::contract::CoHostInviteBody>(&mut schemas);
    add_body::<api::contract::CoHostApprovalBody>(&mut schemas);
    add_body::<api::contract::CoHostPermissionsChangeBody>(&mut schemas);
    for schema in schemas.values_mut() {
        unwrap_descriptions(schema);
    }
    schemas
}

/// A description comes from a doc comment wrapped at the code's width: its lines are
/// joined back into one (a blank line still starts a paragraph).
fn unwrap_descriptions(schema: &mut Value) {
    match schema {
        Value::Object(fields) => {
            for (key, value) in fields.iter_mut() {
                match value {
                    Value::String(text) if key == "description" => {
                        *text = text
                            .split("\n\n")
                            .map(|paragraph| paragraph.replace('\n', " "))
                            .collect::<Vec<_>>()
                            .join("\n\n");
                    }
                    _ => unwrap_descriptions(value),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(unwrap_descriptions),
        _ => {}
    }
}

fn add_body<T: RequestBody>(schemas: &mut Map<String, Value>) {
    schemas.insert(T::NAME.to_string(), T::schema());
}

fn add<T: JsonSchema>(generator: &mut schemars::SchemaGenerator) {
    // Named types land in the generator's definitions; the reference it returns is the
    // caller's business.
    let _reference = generator.subschema_for::<T>();
}
