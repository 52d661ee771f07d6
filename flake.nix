{
  description = "garage: a geo-distributed, S3-compatible object store daemon";

  inputs.nixpkgs.url = "github:NixOS/nixpkgs/nixos-unstable";

  outputs = { self, nixpkgs }:
    let
      systems = [ "x86_64-linux" "aarch64-linux" ];
      forAll = f: nixpkgs.lib.genAttrs systems (system: f nixpkgs.legacyPackages.${system});
    in
    {
      packages = forAll (pkgs: rec {
        garage = pkgs.callPackage ./nix/package.nix { };
        default = garage;
      });

      devShells = forAll (pkgs: {
        default = pkgs.mkShell {
          inputsFrom = [ self.packages.${pkgs.system}.garage ];
          packages = with pkgs; [
            cargo rustc rustfmt clippy rust-analyzer
            # What the end-to-end tests drive the server with.
            awscli2 (python3.withPackages (p: [ p.boto3 ])) curl restic
            chromium prometheus
          ];
        };
      });

      nixosModules.default = import ./nix/module.nix;
      nixosModules.garage = self.nixosModules.default;

      checks = forAll (pkgs: {
        # The package builds from Cargo.lock.
        package = self.packages.${pkgs.system}.garage;
        # The unit tests of every crate (the end-to-end tests need
        # aws-cli, boto3, chromium and prometheus: run them with
        # `nix develop -c cargo test --workspace`).
        unit-tests = self.packages.${pkgs.system}.garage.overrideAttrs (_: {
          doCheck = true;
        });
        # The NixOS module evaluates and starts a node.
        module = pkgs.testers.runNixOSTest (import ./nix/test.nix { inherit self; });
      });

      formatter = forAll (pkgs: pkgs.nixpkgs-fmt);
    };
}
