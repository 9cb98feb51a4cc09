// gpugeo:meshcontours — contour lines and filled contour polygons of mesh datasets, whole lines and
// valid polygons: a drop-in for QGIS's own "Export contours" (native:meshcontours).
#pragma once

#include <vector>

#include <QString>

#include <qgscoordinatereferencesystem.h>

#include "adapters/mesh_reader.h"
#include "core/stage_times.h"
#include "gpugeo_algorithm.h"

namespace gpugeo {

class MeshContoursAlgorithm : public Algorithm
{
public:
  QString name() const override;
  QString displayName() const override;
  QStringList tags() const override;
  QString group() const override;
  QString groupId() const override;
  QString shortDescription() const override;
  QString shortHelpString() const override;
  MeshContoursAlgorithm* createInstance() const override;

protected:
  QString iconFile() const override;
  void initAlgorithm(const QVariantMap& configuration = QVariantMap()) override;
  // On the main thread, as QGIS's algorithm does (a mesh layer may not be read from another thread):
  // the levels, the mesh cut into triangles in the output CRS, each group's values.
  bool prepareInputs(const QVariantMap& parameters, QgsProcessingContext& context,
                     QgsProcessingFeedback* feedback) override;
  QVariantMap execute(const QVariantMap& parameters, QgsProcessingContext& context,
                      QgsProcessingFeedback* feedback) override;

private:
  struct Group
  {
    int index = -1;
    QString name;
    bool hasData = false;  // a dataset at the requested time, of a supported type
    VertexField field;
  };

  void prepare(const QVariantMap& parameters, QgsProcessingContext& context, QgsProcessingFeedback* feedback);
  std::vector<double> levels(const QVariantMap& parameters, QgsProcessingContext& context) const;

  std::vector<double> mLevels;
  MeshTriangles mMesh;
  std::vector<Group> mGroups;
  QString mTime;
  QgsCoordinateReferenceSystem mOutputCrs;
  StageTimes mTimes;
};

}  // namespace gpugeo
