//! `schema/plan.schema.json`, generated from the types serde reads plans with.
//!
//! Draft-07 because it is the draft editors' TOML language servers (Taplo, Even Better TOML) check
//! against; a plan points at the schema with a first line `#:schema ../schema/plan.schema.json`.

use std::borrow::Cow;

use schemars::generate::SchemaSettings;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};

use super::{DayCount, PlanDate, PlanFile};
use crate::window::{Cadence, RunOffset};

/// The plan file's JSON Schema, as committed in `schema/plan.schema.json` (with a final newline).
pub fn json_schema() -> String {
    let schema = SchemaSettings::draft07().into_generator().into_root_schema_for::<PlanFile>();
    let mut text = serde_json::to_string_pretty(&schema).expect("a schema is plain JSON");
    text.push('\n');
    text
}

impl JsonSchema for PlanDate {
    fn schema_name() -> Cow<'static, str> {
        "Date".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "A calendar day, written as a TOML date: 2026-03-01.",
            "type": "string",
            "format": "date"
        })
    }
}

impl JsonSchema for super::Size {
    fn schema_name() -> Cow<'static, str> {
        "Size".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "A size: \"50 GiB\", \"1 KiB\", \"1.5 GB\", or a number of bytes.",
            "type": ["string", "integer"],
            "minimum": 0
        })
    }
}

impl JsonSchema for Cadence {
    fn schema_name() -> Cow<'static, str> {
        "Cadence".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "\"day\", \"week\", \"month\", \"quarter\", \"year\" or \"<N> days\".",
            "type": "string",
            "pattern": "^(day|week|month|quarter|year|[1-9][0-9]* days?)$",
            "examples": ["day", "month", "7 days"]
        })
    }
}

impl JsonSchema for RunOffset {
    fn schema_name() -> Cow<'static, str> {
        "RunOffset".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "A whole number of days, e.g. \"1 day\", \"0 days\" or \"-1 day\".",
            "type": "string",
            "pattern": "^-?[0-9]+ days?$",
            "default": "0 days"
        })
    }
}

impl JsonSchema for DayCount {
    fn schema_name() -> Cow<'static, str> {
        "DayCount".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "A whole number of days, e.g. \"7 days\".",
            "type": "string",
            "pattern": "^[0-9]+ days?$"
        })
    }
}
