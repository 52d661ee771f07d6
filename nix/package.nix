# The garage binary, built from Cargo.lock with nixpkgs' rustPlatform.
{ lib, rustPlatform }:

let
  manifest = (lib.importTOML ../Cargo.toml).workspace.package;
in
rustPlatform.buildRustPackage {
  pname = "garage";
  inherit (manifest) version;

  src = lib.fileset.toSource {
    root = ../.;
    fileset = lib.fileset.unions [
      ../Cargo.toml
      ../Cargo.lock
      ../src
    ];
  };
  cargoLock.lockFile = ../Cargo.lock;

  cargoBuildFlags = [ "-p" "garage" "--bin" "garage" ];
  # Unit tests only (see flake.nix `checks.unit-tests`); the end-to-end
  # tests start real clients that the build sandbox does not have.
  doCheck = false;
  cargoTestFlags = [ "--workspace" "--lib" ];

  meta = {
    description = "Geo-distributed, S3-compatible object store daemon";
    license = lib.licenses.agpl3Only;
    mainProgram = "garage";
    platforms = lib.platforms.linux;
  };
}
