"""`scan --ec2 … --group-by TAG` on the AWS stand-ins (moto's server and the test SSM endpoint, loopback):
a label is known only once EC2 discovery has answered, and is checked then, before any command is sent."""

from __future__ import annotations

from pathlib import Path

from tests.ssm_endpoint import AwsStandIns, local_runner
from tests.unit.bad_input.test_options import run_cli


def test_ec2_tag_labels_are_checked_after_discovery_and_before_any_command(tmp_path: Path) -> None:
    """With --ec2, tags become labels only at discovery (an EC2 API call, no host contacted): an unknown
    --group-by label exits 2 right after it, before any SSM command; a tag's name is accepted."""
    with AwsStandIns(visibility_lag_s=0.0) as aws:
        aws.install_probe_document()
        image = aws.ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
        tags = [{"Key": "cluster", "Value": "ml"}, {"Key": "team", "Value": "gpu"}, {"Key": "Name", "Value": "g1"}]
        instance = aws.ec2.run_instances(ImageId=image, MinCount=1, MaxCount=1, InstanceType="p4d.24xlarge",
                                         Placement={"AvailabilityZone": "us-east-1a"},
                                         TagSpecifications=[{"ResourceType": "instance", "Tags": tags}])
        aws.endpoint.add_instance(instance["Instances"][0]["InstanceId"], local_runner())
        common = ["scan", "--ec2", "tag:cluster=ml", "--region", "us-east-1", "--ssm-poll-interval", "0.2",
                  "--binary", "sh"]
        out = tmp_path / "out"
        code, text = run_cli([*common, "--group-by", "tier", "--out", str(out)])
        assert code == 2 and "--group-by: unknown label 'tier'" in text and "team" in text, text
        assert aws.endpoint.sent_commands == [] and not out.exists()

        code, text = run_cli([*common, "--group-by", "team", "--out", str(out)])
        assert code in (0, 1), text
        assert len(aws.endpoint.sent_commands) == 1 and (out / "report.json").is_file()
