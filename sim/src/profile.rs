//! The shipped device profiles (TOML files under `profiles/`) and the loaders that resolve
//! `extends` against them. The schema itself is [`mlx5_dv::profile`].

use std::path::Path;

pub use mlx5_dv::profile::*;

/// The profiles shipped with the simulator, by name, as TOML text.
const BUILTIN: &[(&str, &str)] = &[
    ("cx5", include_str!("../profiles/cx5.toml")),
    ("cx6lx", include_str!("../profiles/cx6lx.toml")),
    ("cx6dx", include_str!("../profiles/cx6dx.toml")),
    ("cx6dx-no-update-tag", include_str!("../profiles/cx6dx-no-update-tag.toml")),
    ("cx6dx-no-devx", include_str!("../profiles/cx6dx-no-devx.toml")),
    ("cx6dx-single-block", include_str!("../profiles/cx6dx-single-block.toml")),
    ("cx7", include_str!("../profiles/cx7.toml")),
    ("bf3", include_str!("../profiles/bf3.toml")),
    ("cx6dx-rdma-core-44", include_str!("../profiles/cx6dx-rdma-core-44.toml")),
];

/// The profile used when none is named.
pub const DEFAULT_PROFILE: &str = "cx6dx";

fn builtin_text(name: &str) -> Option<&'static str> {
    BUILTIN.iter().find(|(n, _)| *n == name).map(|(_, t)| *t)
}

/// Loading profiles with the shipped ones as the bases `extends` may name.
pub trait ShippedProfiles: Sized {
    /// The names of the shipped profiles, in a stable order.
    fn builtin_names() -> Vec<&'static str>;
    /// Load a shipped profile by name.
    fn builtin(name: &str) -> Result<Self, ProfileError>;
    /// Parse TOML text whose `extends` may name a shipped profile.
    fn load(text: &str, origin: &str) -> Result<Self, ProfileError>;
    /// Load a shipped profile if `name_or_path` names one, else read it as a file.
    fn resolve(name_or_path: &str) -> Result<Self, ProfileError>;
}

impl ShippedProfiles for Profile {
    fn builtin_names() -> Vec<&'static str> {
        BUILTIN.iter().map(|(n, _)| *n).collect()
    }

    fn builtin(name: &str) -> Result<Profile, ProfileError> {
        let text = builtin_text(name).ok_or_else(|| ProfileError {
            origin: name.to_string(),
            message: format!("no such shipped profile; the shipped ones are {}", Self::builtin_names().join(", ")),
        })?;
        Self::load(text, name)
    }

    fn load(text: &str, origin: &str) -> Result<Profile, ProfileError> {
        Profile::from_toml_str(text, origin, &builtin_text)
    }

    fn resolve(name_or_path: &str) -> Result<Profile, ProfileError> {
        if builtin_text(name_or_path).is_none() && Path::new(name_or_path).exists() {
            Profile::from_file(Path::new(name_or_path), &builtin_text)
        } else {
            Self::builtin(name_or_path)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type TestResult = Result<(), Box<dyn std::error::Error>>;

    #[test]
    fn every_shipped_profile_loads_under_its_own_name() -> TestResult {
        for name in Profile::builtin_names() {
            assert_eq!(Profile::builtin(name)?.name, name);
        }
        Ok(())
    }

    #[test]
    fn a_profile_round_trips_through_toml() -> TestResult {
        let p = Profile::builtin("cx7")?;
        assert_eq!(Profile::load(&p.to_toml_string()?, "rt")?, p);
        Ok(())
    }

    #[test]
    fn extends_overrides_only_named_keys() -> TestResult {
        let p = Profile::builtin("cx6dx-no-update-tag")?;
        let base = Profile::builtin("cx6dx")?;
        assert!(!p.kernel.mkey_update_tag);
        assert!(base.kernel.mkey_update_tag);
        assert_eq!(p.hca_cap, base.hca_cap);
        Ok(())
    }

    #[test]
    fn crypto_profiles_have_the_engines_and_import_methods_they_claim() -> TestResult {
        let engines = |p: &Profile| {
            (p.hca_cap.crypto, p.hca_cap.aes_xts_single_block_le_tweak, p.hca_cap.aes_xts_multi_block_be_tweak)
        };
        let wrapped = |p: &Profile| p.crypto_cap.wrapped_crypto_operational && p.crypto_cap.wrapped_import_method == 4;
        let cx6dx = Profile::builtin("cx6dx")?;
        assert_eq!((engines(&cx6dx), wrapped(&cx6dx)), ((true, true, true), true));
        let single = Profile::builtin("cx6dx-single-block")?;
        assert_eq!((engines(&single), wrapped(&single)), ((true, true, false), true));
        let bf3 = Profile::builtin("bf3")?;
        assert_eq!((engines(&bf3).0, engines(&bf3).2, wrapped(&bf3)), (true, true, false));
        let cx7 = Profile::builtin("cx7")?;
        assert_eq!((engines(&cx7).0, engines(&cx7).2), (true, true));
        for name in ["cx5", "cx6lx"] {
            assert_eq!(engines(&Profile::builtin(name)?), (false, false, false), "{name}");
        }
        assert_eq!(cx6dx.crypto, CryptoSection::default(), "the documented test values");
        Ok(())
    }

    #[test]
    fn crypto_secrets_are_checked_and_hex_read() -> TestResult {
        let text = "extends = \"cx6dx\"\n[[crypto.import_keks]]\nid = 5\nkey = \"00112233445566778899aabbccddeeff\"\n";
        let p = Profile::load(text, "x")?;
        assert_eq!(p.crypto.import_keks.len(), 1, "a table replaces the default list");
        assert_eq!(p.crypto.import_keks[0].key[1], 0x11);
        for bad in ["key = \"0011\"", "key = \"zz\"", "id = 16777216\nkey = \"00112233445566778899aabbccddeeff\""] {
            let text = format!("extends = \"cx6dx\"\n[[crypto.import_keks]]\nid = 5\n{bad}\n");
            let text = text.replacen("id = 5\nid", "id", 1);
            assert!(Profile::load(&text, "x").is_err(), "{bad}");
        }
        Ok(())
    }

    #[test]
    fn device_names_count_up_from_the_first() -> TestResult {
        let mut p = Profile::builtin("cx5")?;
        assert_eq!(p.device_names(), ["mlx5_0", "mlx5_1"]);
        p.device.name = "mlx5_4".into();
        p.device.count = 3;
        assert_eq!(p.device_names(), ["mlx5_4", "mlx5_5", "mlx5_6"]);
        p.device.name = "nic".into();
        p.device.count = 2;
        assert_eq!(p.device_names(), ["nic", "nic1"]);
        Ok(())
    }

    #[test]
    fn limits_out_of_range_are_load_errors_that_name_the_key() {
        for (table, key, value) in [
            ("datapath", "max_qp_wr", "4294967295"),
            ("datapath", "max_qp_wr", "0"),
            ("datapath", "max_rq_desc_sz", "0"),
            ("datapath", "max_sq_desc_sz", "4294967295"),
            ("datapath", "max_sq_desc_sz", "100"),
            ("hca_cap", "log_max_mkey", "0"),
            ("device", "active_mtu", "9"),
        ] {
            let text = format!("extends = \"cx5\"\n[{table}]\n{key} = {value}\n");
            let e = Profile::load(&text, "x").expect_err(&format!("{key} = {value} must not load"));
            assert!(e.message.contains(key), "{key}: {e}");
        }
        for name in ["mlx5_4294967295", "mlx5_99999999999999999999"] {
            let text = format!("extends = \"cx5\"\n[device]\nname = \"{name}\"\n");
            assert!(Profile::load(&text, "x").is_err(), "{name} numbers two devices past u32");
        }
        let text = "extends = \"cx5\"\n[device]\nname = \"mlx5_4294967295\"\ncount = 1\n";
        assert_eq!(Profile::load(text, "x").map(|p| p.device_names()).ok(), Some(vec!["mlx5_4294967295".to_string()]));
    }

    #[test]
    fn a_typo_is_an_error_that_names_the_key() {
        let text = "extends = \"cx5\"\nname = \"x\"\n[kernel]\nmkey_updte_tag = true\n";
        let e = Profile::load(text, "typo.toml").expect_err("a typo must not load");
        assert!(e.message.contains("mkey_updte_tag"), "{e}");
        assert_eq!(e.origin, "typo.toml");
    }

    #[test]
    fn bad_files_are_clear_errors() {
        assert!(Profile::load("name = ", "x").unwrap_err().message.contains("line 1"));
        assert!(Profile::builtin("cx9").unwrap_err().message.contains("cx6dx"));
        let e = Profile::load("extends = \"nope\"", "x").unwrap_err();
        assert!(e.message.contains("nope"));
        let e = Profile::load("extends = \"cx5\"\n[hca_cap]\nlog_max_mkey = 30", "x").unwrap_err();
        assert!(e.message.contains("log_max_mkey"));
        let e = Profile::from_file(Path::new("/nonexistent/p.toml"), &builtin_text).unwrap_err();
        assert!(e.origin.contains("p.toml"));
    }
}
