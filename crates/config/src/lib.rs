//! conclave-config: the configuration's one typed home (docs/design.md §9, issue 9 item 7).
//!
//! [`settings`] declares every key once — its type, its default (the election cores' own
//! where they have one) and its doc line — reads the layers (built-in defaults, the
//! `--config` file, `CONCLAVE__…` environment variables), reports every unknown key and
//! mistyped value by name, and checks the result into a [`NodeConfig`]: the validated
//! configuration a node runs with, whose election part is the core's own configuration,
//! checked by the core's own `validate()`. `config/default.toml` is written from the
//! declarations ([`settings::defaults_toml`]).
//!
//! It depends on the protocol and the core only, not on the actor runtime: the binary's
//! `check-config` and `defaults` need nothing more, and conclave-actors builds its node from a
//! [`NodeConfig`].

mod node;
pub mod settings;
pub mod tls;
mod tokens;

pub use node::*;
pub use tokens::{AdminToken, TokenRole, TokenScope, secret_digest};
