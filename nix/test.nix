# A NixOS VM test of the module (flake.nix `checks.module`): the service
# starts a single node, which answers S3 and the CLI.
{ self }:
{
  name = "garage-node";
  nodes.machine = { pkgs, ... }: {
    imports = [ self.nixosModules.default ];
    services.garage-node.enable = true;
    environment.systemPackages = [ pkgs.curl ];
  };
  testScript = ''
    machine.wait_for_unit("garage.service")
    machine.wait_for_open_port(3900)
    machine.wait_for_open_port(3903)
    machine.succeed("garage status")
    # Unsigned requests are refused with S3's XML.
    machine.succeed("curl -s http://127.0.0.1:3900/ | grep -q AccessDenied")
  '';
}
